"""Helpers of the sanitizer tests: source lines of kernels and the findings of a launch."""

import inspect

import pypto_pro


def line_of(fn, text):
    """The source line of the first line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


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
