// placementctl — the command-line client of the placement service (api.md §3).
//
//   placementctl --server=HOST:PORT place --request=FILE [--algorithm=NAME] [--out=FILE] [--report=FILE]
//                [--format=auto|json|summary]
//   placementctl --server=HOST:PORT submit --request=FILE [--output=json|name]
//   placementctl --server=HOST:PORT wait|get|cancel --operation=NAME   (or the name as an argument)
//   placementctl --server=HOST:PORT evaluate --request=FILE --placement=FILE
//   placementctl --server=HOST:PORT recommend --request=FILE [--max_devices=N]
//                [--objective=fastest|fewest_within|best_per_device] [--within_percent=X]
//   placementctl --server=HOST:PORT algorithms
//   placementctl --server=HOST:PORT health [--service=NAME]
//
// Output is JSON on stdout (the same Placement JSON as `placement_offline place`), except that place,
// wait and evaluate print a short summary instead when stdout is a terminal (or with
// --format=summary; --format=json forces JSON). Errors go to stderr as "CODE: message" (plus one line
// per field violation). See kUsage for the exit codes.
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpc/support/log.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/credential_flags.h"
#include "client/placement_client.h"
#include "client/progress_bar.h"
#include "client/routing_digest.h"
#include "service/engine/io/message_io.h"
#include "service/engine/io/placement_file.h"
#include "service/engine/model/model_builder.h"
#include "service/report/report.h"
#include "service/report/text_summary.h"

ABSL_FLAG(std::string, server, "localhost:50051", "Server address, HOST:PORT (any gRPC target).");
ABSL_FLAG(std::string, request, "", "PlaceRequest file (.json, .json.gz or .pb).");
ABSL_FLAG(std::string, algorithm, "", "Algorithm (overrides the request's options.algorithm).");
ABSL_FLAG(std::string, out, "", "Write the result here instead of standard output.");
ABSL_FLAG(int32_t, microbatches, -1,
          "Training plan: microbatches per step (api.md §2.1; -1 = the request's options.microbatches).");
ABSL_FLAG(int32_t, max_in_flight, -1,
          "Training plan: microbatches in flight at most, 0 = the server chooses (-1 = the request's).");
ABSL_FLAG(int32_t, data_parallel, -1,
          "Training plan: data-parallel replicas, 0 = the server chooses (-1 = the request's).");
ABSL_FLAG(std::string, report, "",
          "place: also write an HTML report of the result here (simulated locally, service/report).");
ABSL_FLAG(std::string, placement, "",
          "Placement file for evaluate (a Placement, PlaceResponse or EvaluateResponse; JSON or .pb).");
ABSL_FLAG(std::string, previous, "",
          "Re-placement, for place, submit and evaluate: the previous placement (a Placement, "
          "PlaceResponse or EvaluateResponse file); needs --previous_request.");
ABSL_FLAG(std::string, previous_request, "",
          "Re-placement: the request the --previous placement answered (names its ops and devices; its "
          "devices missing from --request's cluster are sent as options.departed_devices).");
ABSL_FLAG(double, move_weight, -1,
          "Re-placement: ns of step traded for one byte moved (-1 = the request's "
          "options.move_weight_ns_per_byte).");
ABSL_FLAG(std::string, operation, "", "Operation name (operations/...) for wait, get and cancel.");
ABSL_FLAG(std::string, output, "json", "What submit prints: json (the Operation) or name.");
ABSL_FLAG(std::string, service, "", "Service name for health (\"\" = the server as a whole).");
ABSL_FLAG(absl::Duration, timeout, absl::Minutes(10),
          "Deadline of the whole command (place, wait, evaluate; also caps the algorithm's time).");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5),
          "How long to wait for the connection before giving up (exit status 2).");
ABSL_FLAG(int, retries, 4, "Retries on UNAVAILABLE (exponential backoff, honouring RetryInfo).");
ABSL_FLAG(int, max_message_bytes, 256 << 20, "Largest message sent or received.");
ABSL_FLAG(bool, digest_header, false,
          "Send the request's routing key (a digest of its content, computed here) as "
          "x-placement-digest, so a hashing router (deploy/nginx/placement.conf) sends identical "
          "requests to one replica.");
ABSL_FLAG(std::string, format, "auto",
          "What place, wait and evaluate print: auto (a short summary when standard output is a "
          "terminal, else JSON), json (always; byte for byte what scripts always got), summary.");
ABSL_FLAG(int32_t, max_devices, 0,
          "recommend: evaluate 1..N devices of the request's cluster (the pool; 0 = all of them).");
ABSL_FLAG(std::string, objective, "fastest",
          "recommend: fastest, fewest_within (the fewest devices within --within_percent of the "
          "fastest) or best_per_device.");
ABSL_FLAG(double, within_percent, 0, "recommend: the threshold of --objective=fewest_within, in %.");
ABSL_FLAG(bool, include_placements, false, "recommend: put each candidate's placement in its row.");
ABSL_FLAG(bool, submit_only, false,
          "recommend: start the candidates as operations and return at once (their names in the rows).");
ABSL_FLAG(std::string, progress, "auto",
          "Progress bar on stderr while a job runs: auto (if stderr is a terminal), always, never.");

namespace {

using placement::client::PlacementClient;
using placement::client::ProgressBar;
using placement::client::StatusLine;
namespace v1 = placement::v1;
namespace engine = placement::engine;

constexpr char kUsage[] =
    "placementctl --server=HOST:PORT <verb> [flags]: the placement service's command-line client.\n"
    "\n"
    "verbs:\n"
    "  place     --request=FILE [--algorithm=NAME] [--out=FILE]   print the Placement\n"
    "            [--report=FILE.html]       also write an HTML report (Gantt chart, memory, summary)\n"
    "  submit    --request=FILE [--output=json|name]  start a job, print its Operation (or name)\n"
    "  wait      --operation=NAME | NAME    wait until done, print the Placement\n"
    "            [--request=FILE]           (device names and the one-device time in the summary)\n"
    "  get       --operation=NAME | NAME    print the Operation as it is now\n"
    "  cancel    --operation=NAME | NAME    cancel it, print the Operation\n"
    "  evaluate  --request=FILE --placement=FILE       score a placement (EvaluateResponse)\n"
    "  recommend --request=FILE [--max_devices=N] [--objective=fastest|fewest_within|best_per_device]\n"
    "            [--within_percent=X] [--include_placements] [--submit_only]\n"
    "                                       how many devices of the request's cluster: every count\n"
    "                                       1..N with every data-parallel split, the table and the\n"
    "                                       recommendation (RecommendResponse)\n"
    "  algorithms                           list the server's algorithms (JSON)\n"
    "  health    [--service=NAME]           print SERVING / NOT_SERVING / SERVICE_UNKNOWN\n"
    "\n"
    "training plans (api.md §2.1), for place, submit and evaluate: --microbatches=M\n"
    "  --max_in_flight=W --data_parallel=D (0 = the server chooses W or D; default: the request's)\n"
    "re-placement, for place, submit and evaluate: --previous=FILE --previous_request=FILE (a\n"
    "  placement and the request it answered) --move_weight=X (ns of step per byte moved)\n"
    "place, wait and evaluate print a short summary when standard output is a terminal, JSON\n"
    "otherwise; --format=json or --format=summary chooses. Other verbs print JSON.\n"
    "\n"
    "Exit status: 0 success; 1 the server answered with an error, or the job failed (printed as\n"
    "\"CODE: message\"); 2 cannot connect; 64 usage error; 66 cannot read an input file.\n"
    "health follows grpc_health_probe: 0 SERVING, 2 cannot connect, 3 the RPC failed, 4 not SERVING.\n"
    "\n"
    "Security: --tls_ca=FILE (or --tls for the system's CAs) for TLS, plus --tls_cert=FILE\n"
    "--tls_key=FILE for mutual TLS; --token_file=FILE (or --token=TOKEN) for servers with tokens.\n";

constexpr int kExitFailed = 1;
constexpr int kExitConnect = 2;
constexpr int kExitUsage = 64;
constexpr int kExitNoInput = 66;

int Usage(const std::string& message) {
  std::fprintf(stderr, "%s\n\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

int Fail(const absl::Status& status) {
  // The message already lists every field violation, one per line.
  std::fprintf(stderr, "%s\n", StatusLine(status).c_str());
  if (std::optional<absl::Duration> delay = placement::client::RetryDelayOf(status)) {
    std::fprintf(stderr, "  (the server suggests retrying in %s)\n",
                 absl::FormatDuration(*delay).c_str());
  }
  return kExitFailed;
}

// JSON to --out or stdout.
int Emit(const google::protobuf::Message& message) {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::cout << engine::MessageToJson(message) << "\n";
    return std::cout.good() ? 0 : kExitFailed;
  }
  absl::Status written = engine::WriteMessageFile(message, out);
  if (!written.ok()) return Fail(written);
  return 0;
}

absl::Time CommandDeadline() { return absl::Now() + absl::GetFlag(FLAGS_timeout); }

// The operation name from --operation or the first argument.
std::string OperationName(const std::vector<std::string>& args) {
  if (!absl::GetFlag(FLAGS_operation).empty()) return absl::GetFlag(FLAGS_operation);
  return args.empty() ? "" : args.front();
}

// Reads --request (exit code in *exit_code on failure).
bool ReadRequest(v1::PlaceRequest* request, int* exit_code) {
  const std::string path = absl::GetFlag(FLAGS_request);
  if (path.empty()) {
    *exit_code = Usage("--request=FILE is required");
    return false;
  }
  absl::Status read = engine::ReadMessageFile(path, *request);
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", StatusLine(read).c_str());
    *exit_code = kExitNoInput;
    return false;
  }
  v1::PlacementOptions* options = request->mutable_options();
  if (!absl::GetFlag(FLAGS_algorithm).empty()) options->set_algorithm(absl::GetFlag(FLAGS_algorithm));
  if (absl::GetFlag(FLAGS_microbatches) >= 0) options->set_microbatches(absl::GetFlag(FLAGS_microbatches));
  if (absl::GetFlag(FLAGS_max_in_flight) >= 0) {
    options->set_max_in_flight(absl::GetFlag(FLAGS_max_in_flight));
  }
  if (absl::GetFlag(FLAGS_data_parallel) >= 0) {
    options->set_data_parallel(absl::GetFlag(FLAGS_data_parallel));
  }
  // Re-placement: the previous answer, by op and device names, and the price of a moved byte.
  const std::string previous = absl::GetFlag(FLAGS_previous);
  if (previous.empty() != absl::GetFlag(FLAGS_previous_request).empty()) {
    *exit_code = Usage("--previous and --previous_request go together");
    return false;
  }
  if (!previous.empty()) {
    const absl::Status set = engine::ReadPreviousPlacement(previous, absl::GetFlag(FLAGS_previous_request),
                                                           request->cluster(), options);
    if (!set.ok()) {
      std::fprintf(stderr, "%s\n", StatusLine(set).c_str());
      *exit_code = kExitNoInput;
      return false;
    }
  }
  if (absl::GetFlag(FLAGS_move_weight) != -1) {
    options->set_move_weight_ns_per_byte(absl::GetFlag(FLAGS_move_weight));
  }
  return true;
}

// Writes the HTML report of `placement` for `request` to --report: the schedule is re-simulated here
// with the engine library, which is the same simulator the server scored it with.
int WriteReport(const v1::PlaceRequest& request, const v1::Placement& placement) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) return Fail(model.status());
  placement::report::ReportOptions options;
  options.subtitle =
      absl::StrCat(absl::GetFlag(FLAGS_request), " placed by ", absl::GetFlag(FLAGS_server));
  const std::string label =
      placement.provenance().algorithm().empty() ? "server result" : placement.provenance().algorithm();
  absl::StatusOr<std::string> html =
      placement::report::RenderHtmlReport(*model, {{label, placement, ""}}, options);
  if (!html.ok()) return Fail(html.status());
  absl::Status written = engine::WriteFileBytes(absl::GetFlag(FLAGS_report), *html);
  return written.ok() ? 0 : Fail(written);
}

// --out names a file (not "-", standard output).
bool WritesAFile() {
  const std::string out = absl::GetFlag(FLAGS_out);
  return !out.empty() && out != "-";
}

// The answer of place, wait or evaluate (`message`: the Placement or the EvaluateResponse that holds
// `placement`): JSON to --out or stdout exactly as always, or the summary on stdout when --format asks
// for it (with --out the file still gets the JSON). `request` (may be null) gives the summary device
// names and the single-device comparison.
int EmitAnswer(const google::protobuf::Message& message, const v1::Placement& placement,
               const v1::PlaceRequest* request,
               const google::protobuf::RepeatedPtrField<v1::ConstraintViolation>* violations) {
  // Validated in main().
  const placement::report::OutputFormat format =
      placement::report::ResolveOutputFormat(absl::GetFlag(FLAGS_format),
                                             placement::report::StdoutIsTerminal())
          .value_or(placement::report::OutputFormat::kJson);
  if (format == placement::report::OutputFormat::kJson || WritesAFile()) {
    const int emitted = Emit(message);
    if (emitted != 0 || format == placement::report::OutputFormat::kJson) return emitted;
  }
  placement::report::SummaryContext context;
  if (request != nullptr) {
    context.graph = &request->graph();
    context.cluster = &request->cluster();
    context.options = &request->options();
  } else {
    context.request_hint = "add --request=FILE for it";
  }
  context.violations = violations;
  std::cout << placement::report::FormatSummary(placement, context);
  return std::cout.good() ? 0 : kExitFailed;
}

// Prints `placement`, then writes its report when `report_request` is given and --report is set.
int EmitPlacement(const v1::Placement& placement, const v1::PlaceRequest* report_request) {
  const int emitted = EmitAnswer(placement, placement, report_request, nullptr);
  if (emitted != 0 || report_request == nullptr || absl::GetFlag(FLAGS_report).empty()) return emitted;
  return WriteReport(*report_request, placement);
}

// Prints the result of a finished operation: its placement, or its error.
int EmitOperationResult(const v1::Operation& operation,
                        const v1::PlaceRequest* report_request = nullptr) {
  if (operation.has_error()) {
    return Fail(placement::client::FromStatusProto(operation.error()));
  }
  if (!operation.has_response()) {
    return Fail(absl::DeadlineExceededError(
        absl::StrCat("operation ", operation.name(), " is not done yet")));
  }
  return EmitPlacement(operation.response().placement(), report_request);
}

// Waits for an operation, drawing a progress bar on a terminal.
int WaitAndEmit(PlacementClient& client, const std::string& name,
                const v1::PlaceRequest* report_request = nullptr) {
  ProgressBar bar(stderr, ProgressBar::Enabled(stderr, absl::GetFlag(FLAGS_progress)));
  absl::StatusOr<v1::Operation> done = client.WaitUntilDone(
      name, CommandDeadline(), [&bar](const v1::Operation& update) { bar.Update(update.metadata()); });
  bar.Finish();
  if (!done.ok()) return Fail(done.status());
  return EmitOperationResult(*done, report_request);
}

int RunPlace(PlacementClient& client) {
  v1::PlaceRequest request;
  int exit_code = 0;
  if (!ReadRequest(&request, &exit_code)) return exit_code;
  if (ProgressBar::Enabled(stderr, absl::GetFlag(FLAGS_progress))) {
    // On a terminal: run it as an operation so that progress can be shown; Ctrl-C leaves it to the
    // server's TTL (or `placementctl cancel`).
    absl::StatusOr<v1::Operation> operation = client.Submit(request);
    if (!operation.ok()) return Fail(operation.status());
    if (operation->done()) return EmitOperationResult(*operation, &request);
    return WaitAndEmit(client, operation->name(), &request);
  }
  absl::StatusOr<v1::PlaceResponse> response = client.Place(request, absl::GetFlag(FLAGS_timeout));
  if (!response.ok()) return Fail(response.status());
  return EmitPlacement(response->placement(), &request);
}

int RunSubmit(PlacementClient& client) {
  v1::PlaceRequest request;
  int exit_code = 0;
  if (!ReadRequest(&request, &exit_code)) return exit_code;
  absl::StatusOr<v1::Operation> operation = client.Submit(request);
  if (!operation.ok()) return Fail(operation.status());
  if (absl::GetFlag(FLAGS_output) == "name") {
    std::cout << operation->name() << "\n";
    return 0;
  }
  return Emit(*operation);
}

int RunEvaluate(PlacementClient& client) {
  if (absl::GetFlag(FLAGS_placement).empty()) return Usage("--placement=FILE is required");
  v1::PlaceRequest request;
  int exit_code = 0;
  if (!ReadRequest(&request, &exit_code)) return exit_code;
  absl::StatusOr<v1::Placement> placement =
      engine::ReadPlacementFile(absl::GetFlag(FLAGS_placement));
  if (!placement.ok()) {
    std::fprintf(stderr, "%s\n", StatusLine(placement.status()).c_str());
    return kExitNoInput;
  }
  v1::EvaluateRequest evaluate;
  // Copies, not moves: the summary needs the graph and cluster afterwards.
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  *evaluate.mutable_options() = request.options();
  *evaluate.mutable_device() = placement->device();
  absl::StatusOr<v1::EvaluateResponse> response =
      client.Evaluate(evaluate, absl::GetFlag(FLAGS_timeout));
  if (!response.ok()) return Fail(response.status());
  return EmitAnswer(*response, response->placement(), &request, &response->violations());
}

int RunRecommend(PlacementClient& client) {
  v1::PlaceRequest place;
  int exit_code = 0;
  if (!ReadRequest(&place, &exit_code)) return exit_code;
  v1::RecommendRequest request;
  request.mutable_graph()->Swap(place.mutable_graph());
  request.mutable_cluster()->Swap(place.mutable_cluster());
  request.mutable_options()->Swap(place.mutable_options());
  request.set_max_devices(absl::GetFlag(FLAGS_max_devices));
  const std::string objective = absl::GetFlag(FLAGS_objective);
  if (objective == "fastest") {
    request.set_objective(v1::RECOMMEND_OBJECTIVE_FASTEST);
  } else if (objective == "fewest_within") {
    request.set_objective(v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN);
  } else if (objective == "best_per_device") {
    request.set_objective(v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE);
  } else {
    return Usage(absl::StrCat("--objective=", objective,
                              ": expected fastest, fewest_within or best_per_device"));
  }
  request.set_within_percent(absl::GetFlag(FLAGS_within_percent));
  request.set_include_placements(absl::GetFlag(FLAGS_include_placements));
  request.set_submit_only(absl::GetFlag(FLAGS_submit_only));
  absl::StatusOr<v1::RecommendResponse> response = client.Recommend(request, absl::GetFlag(FLAGS_timeout));
  if (!response.ok()) return Fail(response.status());
  const placement::report::OutputFormat format =
      placement::report::ResolveOutputFormat(absl::GetFlag(FLAGS_format),
                                             placement::report::StdoutIsTerminal())
          .value_or(placement::report::OutputFormat::kJson);
  if (format == placement::report::OutputFormat::kJson || WritesAFile()) {
    const int emitted = Emit(*response);
    if (emitted != 0 || format == placement::report::OutputFormat::kJson) return emitted;
  }
  std::cout << placement::report::FormatRecommendation(*response);
  return std::cout.good() ? 0 : kExitFailed;
}

// True when a TCP connection to `target` ("host:port", "dns:///host:port", "[v6]:port") opens within
// `timeout`; nullopt for targets that are not a host and port (unix sockets, other schemes).
std::optional<bool> TcpReachable(std::string target, absl::Duration timeout) {
  if (absl::StartsWith(target, "dns:///")) target = target.substr(7);
  if (absl::StrContains(target, ":/") || absl::StartsWith(target, "unix:")) return std::nullopt;
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = target.substr(0, colon);
  const std::string port = target.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool reachable = false;
  for (addrinfo* a = found; a != nullptr && !reachable; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(timeout)),
               .tv_usec = static_cast<suseconds_t>(
                   absl::ToInt64Microseconds(timeout) % 1'000'000)};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));  // bounds connect() on Linux
    reachable = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(found);
  return reachable;
}

// Exits at once after a failed connection. gRPC's threads may still be in the middle of a (failed) TLS
// handshake; running static destructors under them crashed placementctl now and then (SIGSEGV after
// the message was printed), so the process ends without them.
[[noreturn]] void ExitAfterConnectFailure(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

// "cannot connect" with what can be told from here: nothing listens, or something does but the
// gRPC handshake fails — then almost always TLS: plaintext against a TLS server (or the reverse),
// or a server certificate the client does not trust.
std::string ConnectFailure(const placement::client::ClientOptions& options,
                           const absl::Status& status) {
  std::string line = StatusLine(status);
  const std::optional<bool> reachable = TcpReachable(options.target, absl::Seconds(1));
  if (!reachable.has_value()) return line;
  if (!*reachable) {
    return absl::StrCat(line, "\n  nothing accepts connections at ", options.target,
                        " (refused or unreachable): is the server running, and is this its "
                        "address and --port?");
  }
  if (options.tls.enabled) {
    return absl::StrCat(
        line, "\n  ", options.target,
        " accepts connections but the TLS handshake failed: a TLS or certificate problem. "
        "Either the server's certificate is not trusted (signed by another CA than --tls_ca, "
        "issued for another name: --tls_server_name, expired), the server requires a client "
        "certificate (--tls_cert/--tls_key), or the server speaks plaintext (drop --tls/--tls_ca)");
  }
  return absl::StrCat(
      line, "\n  ", options.target,
      " accepts connections but does not answer plaintext gRPC: a TLS problem — the server "
      "probably requires TLS (add --tls_ca=CA.pem, or --tls for a publicly trusted certificate)");
}

int RunHealth(PlacementClient& client, const placement::client::ClientOptions& options) {
  // Exit codes of grpc_health_probe.
  if (absl::Status connected = client.WaitForConnected(absl::GetFlag(FLAGS_connect_timeout));
      !connected.ok()) {
    std::fprintf(stderr, "%s\n", ConnectFailure(options, connected).c_str());
    ExitAfterConnectFailure(2);
  }
  absl::StatusOr<placement::client::ServingStatus> status =
      client.CheckHealth(absl::GetFlag(FLAGS_service), absl::GetFlag(FLAGS_connect_timeout));
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", StatusLine(status.status()).c_str());
    return 3;
  }
  std::cout << placement::client::ServingStatusName(*status) << "\n";
  return *status == placement::client::ServingStatus::kServing ? 0 : 4;
}

// gRPC's own log lines ("E0101 12:00:00.000 ssl_transport_security.cc:...] Handshake failed") say
// less than placementctl's one line about the same failure, and in a format of their own: they are
// dropped, unless GRPC_VERBOSITY asks for them (debugging gRPC itself).
void SilenceGrpcLog() {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) return;
  gpr_set_log_function([](gpr_log_func_args*) {});
}

// Flags whose value can never work are a usage error before anything is sent: a zero timeout would
// only come back as DEADLINE_EXCEEDED from the server, which reads as the server's fault.
std::optional<std::string> FlagProblem() {
  if (absl::GetFlag(FLAGS_timeout) <= absl::ZeroDuration()) {
    return absl::StrCat("--timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_timeout)),
                        ": must be a positive duration (e.g. 30s, 10m)");
  }
  if (absl::GetFlag(FLAGS_connect_timeout) <= absl::ZeroDuration()) {
    return absl::StrCat("--connect_timeout=",
                        absl::FormatDuration(absl::GetFlag(FLAGS_connect_timeout)),
                        ": must be a positive duration (e.g. 5s)");
  }
  if (absl::GetFlag(FLAGS_retries) < 0) {
    return absl::StrCat("--retries=", absl::GetFlag(FLAGS_retries), ": must be 0 or more");
  }
  if (absl::GetFlag(FLAGS_max_message_bytes) < 1024) {
    return absl::StrCat("--max_message_bytes=", absl::GetFlag(FLAGS_max_message_bytes),
                        ": must be at least 1024");
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  SilenceGrpcLog();
  if (positional.size() < 2) return Usage("a verb is required");
  if (std::optional<std::string> problem = FlagProblem()) return Usage(*problem);
  const std::string verb = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());

  placement::client::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_server);
  options.default_timeout = absl::GetFlag(FLAGS_timeout);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (absl::GetFlag(FLAGS_digest_header)) {
    options.routing_digest = placement::client::RoutingDigestOf;
  }
  options.retry.max_attempts = 1 + std::max(0, absl::GetFlag(FLAGS_retries));
  if (absl::Status applied = placement::client::ApplyCredentialFlags(&options); !applied.ok()) {
    if (applied.code() == absl::StatusCode::kNotFound) {
      std::fprintf(stderr, "%s\n", std::string(applied.message()).c_str());
      return kExitNoInput;
    }
    return Usage(std::string(applied.message()));
  }
  if (absl::Status format = placement::report::ResolveOutputFormat(absl::GetFlag(FLAGS_format), false)
                               .status();
      !format.ok()) {
    return Usage(std::string(format.message()));
  }
  PlacementClient client(options);

  if (verb == "health") return RunHealth(client, options);
  static const char* const kVerbs[] = {"place",    "submit",    "wait",      "get",
                                       "cancel",   "evaluate",  "recommend", "algorithms"};
  if (std::find(std::begin(kVerbs), std::end(kVerbs), verb) == std::end(kVerbs)) {
    return Usage(absl::StrCat("unknown verb \"", verb, "\""));
  }
  if ((verb == "wait" || verb == "get" || verb == "cancel") && OperationName(args).empty()) {
    return Usage(absl::StrCat(verb, ": --operation=NAME (or the name as an argument) is required"));
  }
  if (absl::Status connected = client.WaitForConnected(absl::GetFlag(FLAGS_connect_timeout));
      !connected.ok()) {
    std::fprintf(stderr, "%s\n", ConnectFailure(options, connected).c_str());
    ExitAfterConnectFailure(kExitConnect);
  }

  if (verb == "place") return RunPlace(client);
  if (verb == "submit") return RunSubmit(client);
  if (verb == "evaluate") return RunEvaluate(client);
  if (verb == "recommend") return RunRecommend(client);
  if (verb == "wait") {
    // --request is optional here: it only adds device names and the one-device time to the summary.
    v1::PlaceRequest request;
    if (!absl::GetFlag(FLAGS_request).empty()) {
      int exit_code = 0;
      if (!ReadRequest(&request, &exit_code)) return exit_code;
      return WaitAndEmit(client, OperationName(args), &request);
    }
    return WaitAndEmit(client, OperationName(args));
  }
  if (verb == "get" || verb == "cancel") {
    absl::StatusOr<v1::Operation> operation = verb == "get"
                                                  ? client.GetOperation(OperationName(args))
                                                  : client.CancelOperation(OperationName(args));
    if (!operation.ok()) return Fail(operation.status());
    return Emit(*operation);
  }
  absl::StatusOr<v1::ListAlgorithmsResponse> algorithms = client.ListAlgorithms();
  if (!algorithms.ok()) return Fail(algorithms.status());
  return Emit(*algorithms);
}
