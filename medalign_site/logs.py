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
