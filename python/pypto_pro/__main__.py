"""python -m pypto_pro <command>: the project's command line.

    doctor                                 can this machine compile and run kernels? (OK, or what to fix)
    ls [ROOT] / clean [ROOT]               the kernel artefact directories (default: where kernels land)
    show INSTANCE_DIR                      one instance: its signature, files and generated source
    run script.py [args...]                run a script written for torch_npu, on the simulator
    profile [-o DIR] script.py [args...]   run a script under pypto_pro.profiler (docs/profiler.md)
    cache [dir | ls | clear | warm]        the persistent kernel cache and the precompiled device code
                                           (docs/jit.md#persistent-cache); warm builds the latter now
"""

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "doctor":
        from pypto_pro import doctor

        return doctor.main(rest)
    if command in ("ls", "clean", "show"):
        from pypto_pro import artefacts

        return artefacts.main(command, rest)
    if command == "run":
        from pypto_pro import npu_compat

        return npu_compat.main(rest)
    if command == "profile":
        from pypto_pro import profiler

        return profiler.main(rest)
    if command == "cache":
        from pypto_pro import cache

        return cache.main(rest)
    if command in ("-h", "--help"):
        print(__doc__)
        return 0
    if command:
        print(f"python -m pypto_pro: unknown command {command!r}\n", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
