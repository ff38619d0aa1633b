"""Log formatting that keeps patient text out of the logs.

An exception's message can quote the data it choked on: a psycopg error's DETAIL line carries the
row's values, a parser error the text it could not read. The traceback (file, line, function,
exception type) is what an operator needs, so exception messages are replaced by their length.
"""

import logging
import traceback


def redact_exception(exc: BaseException) -> str:
    """An exception as researchers and the logs see it: its type, never its message (which can
    quote record or response text), only the message's length."""
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return f"{name}: <message redacted, {len(str(exc))} characters>"


class RedactCeleryTaskErrors(logging.Filter):
    """Celery's own lines about a failed task put the exception's repr (and, for internal
    errors, the traceback text) into the message itself: "Task … raised unexpected:
    ValueError('…')". Those arguments are replaced by the exception's type and length; the
    traceback is still logged, through the formatter below, without messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, dict) and "exc" in args:
            exc = record.exc_info[1] if record.exc_info else None
            redacted = dict(args)
            redacted["exc"] = (
                redact_exception(exc)
                if exc is not None
                else f"<message redacted, {len(str(args['exc']))} characters>"
            )
            if "traceback" in redacted:
                redacted["traceback"] = "<traceback logged separately>"
            record.args = redacted
        return True


class RedactingFormatter(logging.Formatter):
    def formatException(self, ei) -> str:  # noqa: ANN001, N802 - logging's signature
        exc_type, exc, tb = ei
        lines = ["Traceback (most recent call last):\n", *traceback.format_tb(tb)]
        seen = set()
        cause = exc.__cause__ or exc.__context__ if exc is not None else None
        while cause is not None and id(cause) not in seen:  # name the chain, not its messages
            seen.add(id(cause))
            lines.insert(0, f"(after {type(cause).__module__}.{type(cause).__qualname__})\n")
            cause = cause.__cause__ or cause.__context__
        name = f"{exc_type.__module__}.{exc_type.__qualname__}" if exc_type else "Exception"
        lines.append(f"{name}: <message redacted, {len(str(exc))} characters>")
        return "".join(lines).rstrip("\n")
