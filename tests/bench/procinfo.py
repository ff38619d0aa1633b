"""Process facts the benchmark commands report."""

from pathlib import Path


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """A process's own peak resident memory (VmHWM) in MB; None if it has gone.

    VmHWM belongs to the process's current image. ``ru_maxrss`` would not do for a child: it
    includes the pages the parent had when it forked.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None
