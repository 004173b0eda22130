"""The launcher a tool's command runs under, so that nothing the command starts outlives the call.

Run as a script (``python -I -S launcher.py <parent-pid> -- argv...``; standard library only, nothing of ThinkFlow
is imported). It makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+, through ctypes),
so every process the command starts -- also one that detaches with ``setsid``, ``nohup ... &`` or a double fork --
is re-parented to the launcher instead of to init when its parent exits. It asks for SIGTERM when the runner
dies (``PR_SET_PDEATHSIG``), forks and execs the command, waits for it, and then kills every remaining
descendant (found by walking ``/proc/<pid>/stat`` parent links from the launcher) with SIGKILL and reaps them
until it has no child left. SIGTERM, SIGINT or SIGHUP (the runner's timeout or Ctrl-C) do the same at once.
It exits with the command's status (a command killed by a signal makes the launcher die of that signal).

Source: prctl(2) for PR_SET_CHILD_SUBREAPER (36) and PR_SET_PDEATHSIG (1); proc(5) for the stat format.
Without prctl (not Linux) only the process group and living parent chains are found.
"""

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLEANUP_SECONDS = 5.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stop(Exception):
    pass


def _prctl(option, value):
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _descendants(root):
    """Pids of every living descendant of ``root`` (parent links read from /proc)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _kill_all(me):
    """SIGKILL every descendant and reap until no child is left (bounded by CLEANUP_SECONDS)."""
    deadline = time.monotonic() + CLEANUP_SECONDS
    while True:
        for pid in _descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.005)


def _raise_stop(signum, frame):
    raise _Stop()


def _exit_like(status):
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(args):
    parent, argv = int(args[0]), args[2:]
    me = os.getpid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    for sig in _SIGNALS:
        signal.signal(sig, _raise_stop)
    if os.getppid() != parent:  # the runner died before PDEATHSIG was set
        os._exit(128 + signal.SIGTERM)
    pid = os.fork()
    if pid == 0:
        try:
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            os.execvp(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - report and leave, never return into the launcher
            try:
                os.write(2, f"could not start {argv[0]!r}: {getattr(exc, 'strerror', None) or exc}\n".encode())
            finally:
                os._exit(127)
    status = None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        _, status = os.waitpid(pid, 0)
    except _Stop:
        status = None
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        _kill_all(me)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
