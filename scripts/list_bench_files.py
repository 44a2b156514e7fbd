"""Reads mla_list_bench's output (bench/pace/list_bench.cpp's header has the format), shared by
scripts/fit_lists.py, scripts/eval_list_rules.py and scripts/fit_whole_requests.py.

read(path) -> (measured, lists, walks), each keyed by the candidate's label "CASE/K":
  measured[label]: dict(which, items, partials, splits, cluster, tma, diff, rounds=[µs per round])
  lists[label]:    the L line's fields after the label (clustered partials split_requests TILES*COUNT ...)
  walks[label]:    the W line's fields after the label (grid partials split_requests | chains ...)
"""


def read(path):
    measured, lists, walks = {}, {}, {}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "M":
            measured[f[1]] = dict(which=int(f[2]), items=int(f[3]), partials=int(f[4]), splits=int(f[5]),
                                  cluster=int(f[6]), tma=int(f[7]), diff=float(f[8]),
                                  rounds=[float(x) for x in f[9:]])
        elif f[0] == "L":
            lists[f[1]] = f[2:]
        elif f[0] == "W":
            walks[f[1]] = f[2:]
    return measured, lists, walks


def case_of(label):
    """The case of a candidate's label: "64x4096r3/5" -> "64x4096r3"."""
    return label.rsplit("/", 1)[0]
