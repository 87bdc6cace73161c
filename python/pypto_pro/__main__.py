"""python -m pypto_pro <command>: the project's command line.

    doctor                                 can this machine compile and run kernels? (OK, or what to fix)
    profile [-o DIR] script.py [args...]   run a script under pypto_pro.profiler (docs/profiler.md)
    cache [dir | ls | clear]               the persistent kernel cache (docs/jit.md#persistent-cache)
"""

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["profile"]:
        from pypto_pro import profiler

        return profiler.main(argv[1:])
    if argv[:1] == ["doctor"]:
        from pypto_pro import doctor

        return doctor.main(argv[1:])
    if argv[:1] == ["cache"]:
        from pypto_pro import cache

        return cache.main(argv[1:])
    if argv and argv[0] not in ("-h", "--help"):
        print(f"python -m pypto_pro: unknown command {argv[0]!r}\n", file=sys.stderr)
    print(__doc__, file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
    return 0 if argv[:1] in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main())
