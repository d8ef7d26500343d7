// placement_offline — the engine without a server, for files and benchmarks (api.md §3).
//
//   placement_offline place    --request=FILE [--algorithm=NAME]
//   placement_offline evaluate --request=FILE --placement=FILE
//   placement_offline compare  --request=FILE [--algorithms=a,b,...] [--format=text|json|csv|markdown]
//   placement_offline convert  --from=FORMAT --in=PATH [--cluster=FILE] --out=FILE
//   placement_offline export   --request=FILE --placement=FILE --to=dot|csv|pardnn
//   placement_offline export   --request=FILE --to=pardnn --out=DIR     (ParDNN's input folder)
//   placement_offline report   --request=FILE [--placement=FILE | --algorithm=a[,b...]] --out=FILE
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "service/offline/offline_commands.h"

namespace {

constexpr char kUsage[] =
    "placement_offline <verb> [flags]: the placement engine without a server.\n"
    "\n"
    "verbs:\n"
    "  place    --request=FILE [--algorithm=NAME]      print the Placement\n"
    "  evaluate --request=FILE --placement=FILE        score a placement (EvaluateResponse)\n"
    "  compare  --request=FILE [--algorithms=a,b,...]  table of every algorithm on one request\n"
    "  convert  --from=FORMAT --in=PATH [--cluster=FILE] --out=FILE   import a graph\n"
    "  export   --request=FILE --placement=FILE --to=dot|csv|pardnn  export a placement\n"
    "  export   --request=FILE --to=pardnn --out=DIR  the graph as ParDNN's input folder\n"
    "  report   --request=FILE [--placement=FILE | --algorithm=a[,b...]] --out=FILE.html\n"
    "           self-contained HTML: Gantt chart, memory over time, summary, comparison\n"
    "\n"
    "\n"
    "training plans (api.md §2.1), for place, evaluate, compare and report: --microbatches=M\n"
    "--max_in_flight=W --data_parallel=D (0 = the solver chooses W or D; default: the request's)\n"
    "\n"
    "re-placement, for place and evaluate: --previous=FILE --previous_request=FILE (a placement and the\n"
    "request it answered: its op -> device names become options.previous_placement, its devices that\n"
    "--request's cluster lacks options.departed_devices) --move_weight=X (ns of step traded for one\n"
    "byte moved; default: the request's options.move_weight_ns_per_byte)\n"
    "\n"
    "place and evaluate print a short summary when standard output is a terminal, JSON otherwise;\n"
    "--format=json or --format=summary chooses.\n"
    "Files: .json, .json.gz (protobuf JSON) or .pb (binary). Exit status: 0 ok, 1 invalid input or\n"
    "failure (problems on stderr, nothing on stdout), 2 usage error.\n";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string verb = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  using namespace placement::offline;
  if (verb == "place") return RunPlace(args);
  if (verb == "evaluate") return RunEvaluate(args);
  if (verb == "compare") return RunCompare(args);
  if (verb == "convert") return RunConvert(args);
  if (verb == "export") return RunExport(args);
  if (verb == "report") return RunReport(args);
  std::fprintf(stderr, "unknown verb \"%s\"\n\n%s", verb.c_str(), kUsage);
  return 2;
}
