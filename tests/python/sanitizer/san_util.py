"""Helpers of the sanitizer tests: source lines of kernels and the findings of a launch."""


import pypto_pro


from kernels import line_of  # noqa: F401 (the sanitizer tests' helper too)


def findings_of(launch):
    """Runs `launch()` and synchronises; the SanitizerFindings it raised, [] when it found nothing."""
    launch()
    try:
        pypto_pro.runtime.synchronize()
    except pypto_pro.SanitizerError as error:
        assert error.findings, "a SanitizerError carries its findings"
        return error.findings
    return []


def kinds_and_lines(findings):
    return sorted((f.kind, f.line) for f in findings)
