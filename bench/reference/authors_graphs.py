#!/usr/bin/env python3
"""The published ParDNN code's own graphs as requests, for run.py (see README.md).

    bench/reference/authors_graphs.py --pardnn_v1=MIRROR_OR_CHECKOUT --out_dir=WORK/authors \
        --offline=build/service/offline/placement_offline
    bench/reference/run.py --pardnn_src=... --corpus=WORK/authors/requests --work=WORK/run ...

Reads its authors' profiled inputs from a checkout (or a bare git mirror) of github fqararyah/ParDNN_v1,
which has no licence: everything this writes goes to --out_dir, a temporary folder outside the
repository. Three graphs:

* resnet32        resnet/resnet.dot, resnet/time_steps_32/nodes_average_durations.txt,
                  resnet/tensors_sz_32.txt (ResNet-32 on CIFAR-10, 6,092 ops)
* inception_core  inc/part_8_1799.dot, inc/time_steps_32/nodes_average_durations.txt, inc/tensors_sz_32.txt
* inception_full  the 48,396-op Inception-v3 training step: its DOT file is not in that repository, but
                  the dagP dump inc/fareed/dag/inc_dagp.dot.partsfile.part_2.seed_0.txt (vertex ids
                  0..48395) with the name map inc/inc_A_dot_mapping.dot (`name::id`, ids from 1) gives
                  its edges; the same durations and tensor sizes as the core graph.

As the published preprocessing does, names are lower-cased and `src`/`snk` edges are added (src -> every
op without inputs, every op without consumers -> snk); durations are the files' microseconds as given
(ops without a line take 1 us in both codes). Each graph becomes a folder in the reference's input
format (empty variable, ref-op and no-op lists) and a request read from it with `convert --from=pardnn`
(run.py converts it again with the reference's cluster model for each K).
"""
import argparse
import os
import re
import subprocess
import sys

CLEAN = re.compile(r'[\s"]')


def reader(source):
    """A function path -> text over a work tree or a (bare) git directory."""
    if os.path.isdir(os.path.join(source, "objects")) and os.path.isfile(os.path.join(source, "HEAD")):
        def show(path):
            return subprocess.run(["git", "--git-dir", source, "show", "HEAD:" + path], check=True,
                                  capture_output=True).stdout.decode("utf-8", errors="replace")
        return show

    def read(path):
        with open(os.path.join(source, path), errors="replace") as f:
            return f.read()
    return read


def name_values(text):
    """`name::value` lines (quotes and blanks removed, names lower-cased); the first value wins."""
    values = {}
    for line in text.splitlines():
        parts = CLEAN.sub("", line).split("::")
        if len(parts) == 2 and parts[0]:
            values.setdefault(parts[0].lower(), parts[1])
    return values


def dot_edges(text):
    edges = []
    for line in text.splitlines():
        line = CLEAN.sub("", line)
        line = re.sub(r"\[.*\]", "", line).rstrip(";")
        parts = line.split("->")
        if len(parts) == 2 and parts[0] and parts[1]:
            edges.append((parts[0].lower(), parts[1].lower()))
    return edges


def dagp_edges(dump, mapping):
    """Edges of a dagP dump (vertex ids from 0) named through the `name::id` map (ids from 1)."""
    name_of = {}
    for line in mapping.splitlines():
        parts = CLEAN.sub("", line).rsplit("::", 1)
        if len(parts) == 2 and parts[1].isdigit():
            name_of[int(parts[1]) - 1] = parts[0].lower()
    edges, vertices = [], []
    for line in dump.splitlines():
        line = CLEAN.sub("", line)
        match = re.match(r"^(\d+)->(\d+)", line)
        if match:
            edges.append((name_of[int(match.group(1))], name_of[int(match.group(2))]))
            continue
        match = re.match(r"^(\d+)\[", line)
        if match:
            vertices.append(name_of[int(match.group(1))])
    return edges, vertices


def write_folder(folder, edges, vertices, durations, sizes):
    os.makedirs(folder, exist_ok=True)
    names, seen = [], set()
    for a, b in edges:
        for n in (a, b):
            if n not in seen:
                seen.add(n)
                names.append(n)
    for n in vertices:
        if n not in seen:
            seen.add(n)
            names.append(n)
    has_in, has_out = set(), set()
    for a, b in edges:
        has_out.add(a)
        has_in.add(b)
    with open(os.path.join(folder, "crn_src_sink_low.dot"), "w") as f:
        f.write("digraph{\n")
        for n in names:
            if n not in has_in:
                f.write('"src"->"%s"\n' % n)
        for a, b in edges:
            f.write('"%s"->"%s"\n' % (a, b))
        for n in names:
            if n not in has_out:
                f.write('"%s"->"snk"\n' % n)
        f.write("}\n")
    with open(os.path.join(folder, "nodes_average_durations_fixed.txt"), "w") as f:
        for n in names:
            if n in durations:
                f.write("%s::%s\n" % (n, durations[n]))
    with open(os.path.join(folder, "tensors_sz_32_low.txt"), "w") as f:
        for n in names:
            if n in sizes:
                f.write('"%s":: %s\n' % (n, sizes[n]))
    for empty in ("var_nodes.txt", "ref_nodes.txt", "no_ops.txt"):
        open(os.path.join(folder, empty), "w").close()
    return len(names), sum(1 for n in names if n in durations)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pardnn_v1", required=True,
                        help="checkout or bare git mirror of github fqararyah/ParDNN_v1")
    parser.add_argument("--out_dir", required=True, help="a temporary folder outside the repository")
    parser.add_argument("--offline", default="build/service/offline/placement_offline")
    parser.add_argument("--only", default="", help="only graphs whose name contains this")
    args = parser.parse_args()
    read = reader(args.pardnn_v1)
    inc_durations = inc_sizes = None
    graphs = [("resnet32", "resnet"), ("inception_core", "inc"), ("inception_full", "inc")]
    os.makedirs(os.path.join(args.out_dir, "requests"), exist_ok=True)
    for name, folder in graphs:
        if args.only not in name:
            continue
        durations = name_values(read(folder + "/time_steps_32/nodes_average_durations.txt"))
        sizes = name_values(read(folder + "/tensors_sz_32.txt"))
        vertices = []
        if name == "resnet32":
            edges = dot_edges(read("resnet/resnet.dot"))
        elif name == "inception_core":
            edges = dot_edges(read("inc/part_8_1799.dot"))
        else:
            edges, vertices = dagp_edges(read("inc/fareed/dag/inc_dagp.dot.partsfile.part_2.seed_0.txt"),
                                         read("inc/inc_A_dot_mapping.dot"))
        inputs = os.path.join(args.out_dir, "inputs", name)
        ops, timed = write_folder(inputs, edges, vertices, durations, sizes)
        request = os.path.join(args.out_dir, "requests", name + ".pb")
        subprocess.run([args.offline, "convert", "--from=pardnn", "--in=" + inputs, "--out=" + request],
                       check=True)
        print("%s: %d ops (%d with a measured duration), %d edges -> %s" % (name, ops, timed, len(edges),
                                                                           request), file=sys.stderr)


if __name__ == "__main__":
    main()
