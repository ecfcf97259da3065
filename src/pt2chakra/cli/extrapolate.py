"""``pt2chakra extrapolate``: CLI wiring over :func:`pt2chakra.scaleout.api.extrapolate`."""

from __future__ import annotations

import argparse

from pt2chakra.cli import options
from pt2chakra.cli.json_out import print_json

EPILOG = """examples:
  pt2chakra extrapolate job.*.et --world-size 1024 -o out/job1024
  pt2chakra simulate out/job1024.*.et          (or: pt2chakra simulate job.*.et --world-size 1024)
  pt2chakra astra-sim out/job1024.*.et -o astra/job
  pt2chakra extrapolate tp2.*.et --tensor-parallel 4 -o out/tp4
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``extrapolate`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("extrapolate", parents=[common], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Scale a data-parallel job recorded on N ranks to M ranks "
                       "(weak scaling: per-rank batch fixed): PREFIX.<rank>.et for every rank, "
                       "process groups and collective sizes rewritten, new ranks cloned from a "
                       "representative recorded rank. See docs/SCALE_OUT.md.")
    p.add_argument("traces", nargs="+", help="every recorded rank's .et file")
    p.add_argument("--world-size", type=options.npus, metavar="M",
                   help="ranks of the job to write (needed unless --tensor-parallel)")
    options.add_tensor_parallel(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR/PREFIX",
                   type=options.output_prefix, help="writes PREFIX.<rank>.et for ranks 0..M-1")
    p.add_argument("--scaling", choices=["weak", "strong"], default="weak",
                   help="weak (per-rank batch fixed, default); strong (a fixed global batch) "
                   "is refused: the trace does not say how per-rank work divides")
    options.add_host_sharing(p)
    options.add_force(p, "the recorded files are not one sound job (validate finds errors, "
                      "their collectives differ)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_cmd_extrapolate)



def _cmd_extrapolate(args: argparse.Namespace) -> int:
    from pt2chakra.scaleout import extrapolate

    world_size, tensor_parallel = options.target_ranks(args)
    if world_size is None:
        from pt2chakra.errors import InputError

        raise InputError("--world-size", "required (the ranks of the job to write), unless "
                         "--tensor-parallel gives the degree")
    summary = extrapolate(args.traces, world_size, args.output, args.scaling,
                          options.host_sharing(args), force=args.force,
                          tensor_parallel=tensor_parallel)
    if args.json:
        print_json(summary)
    elif not args.quiet:
        print(summary.describe())
    return 0
