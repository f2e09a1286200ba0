"""The screen process's sandbox (controller/service/screens/sandbox.py), attacked as a screen
process taken over through the network would: a parent holding a journal open, as the daemon
does, and a child that shut itself in as the screen process does, then tries the journal by
its path and through /proc/<parent>/fd, the key beside it, a signal to its parent, a TCP
connection or a datagram out, a file written, the control socket, a child process and another
program. Real processes, a real SQLite file, the running kernel's
Landlock (the tests are skipped, saying so, on a kernel without it). And the real screen
process of a real daemon is shut in before it serves."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from controller.service.screens import sandbox
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import LinePanelPty, daemon_config, log_records, running_daemon
from support.display_helpers import SCREENS_S, free_port, players_state
from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def landlock_abi() -> int:
    try:
        return sandbox.abi_version()
    except sandbox.SandboxUnavailable as exc:
        pytest.skip(f"this kernel has no Landlock ({exc.strerror}): the screens run unsandboxed")


# the taken-over screen process: shut in as child.py does, then every way to the cards it can
ATTACKER = textwrap.dedent("""
    import json, os, signal, socket, sys
    from controller.service.screens.child import readable_folders
    from controller.service.screens.sandbox import shut_in
    state, port = sys.argv[1], int(sys.argv[2])
    import controller
    controller_file = controller.__file__
    shut_in(readable_folders())
    tried = {}
    def attempt(name, action):
        try:
            action()
            tried[name] = "done"
        except OSError as exc:
            tried[name] = type(exc).__name__
    parent = os.getppid()
    journal = os.path.join(state, "journal.sqlite")
    attempt("journal by its path", lambda: open(journal, "rb").read(16))
    attempt("the key beside it", lambda: open(os.path.join(state, "journal.key"), "rb").read())
    attempt("the parent's descriptors", lambda: os.listdir(f"/proc/{parent}/fd"))
    attempt("the parent's journal descriptor", lambda: open(f"/proc/{parent}/fd/3", "rb").read(16))
    attempt("the parent's environment", lambda: open(f"/proc/{parent}/environ", "rb").read())
    attempt("a file written", lambda: open(os.path.join(state, "planted"), "w").write("x"))
    elsewhere = os.path.join(os.path.dirname(state), "planted-elsewhere")
    attempt("a file written elsewhere", lambda: open(elsewhere, "w").write("x"))
    attempt("a connection out", lambda: socket.create_connection(("127.0.0.1", port), 2))
    attempt("a signal to the parent", lambda: os.kill(parent, signal.SIGSTOP))
    def control():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(os.path.join(state, "control.sock"))
            sock.sendall(b'{"cmd": "supervisor", "action": "pause"}\\n')
            sock.recv(100)
    attempt("the control socket", control)
    attempt("a datagram out", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
        b"cards", ("127.0.0.1", port)))
    def child_outliving():
        if os.fork() == 0:
            os._exit(0)
    attempt("a child that would outlive the daemon", child_outliving)
    attempt("another program", lambda: os.execv("/bin/true", ["true"]))
    # what Landlock leaves to a file's owner, which the screen process is: the journal made
    # readable to all, its owner or times changed, an attribute set
    attempt("the journal's mode", lambda: os.chmod(journal, 0o644))
    attempt("the key's owner", lambda: os.chown(os.path.join(state, "journal.key"),
                                                 os.getuid(), os.getgid()))
    attempt("the journal's times", lambda: os.utime(journal, (0, 0)))
    attempt("an attribute on the journal", lambda: os.setxattr(journal, "user.x", b"1"))
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def checked(result):
        if result < 0:
            raise OSError(ctypes.get_errno(), "refused")
    # io_uring makes sockets and connections whose requests seccomp never sees
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    attempt("a ring for io_uring", lambda: checked(libc.syscall(425, 8, params)))
    attempt("the parent-death signal turned off", lambda: checked(libc.prctl(1, 0, 0, 0, 0)))
    attempt("an identity change", lambda: os.setresuid(os.getuid(), os.getuid(), os.getuid()))
    listening = socket.socket(fileno=4)  # the daemon's listening socket, handed over
    attempt("a filter locked on the listening socket", lambda: listening.setsockopt(
        socket.SOL_SOCKET, 44, 1))
    # any option stays on the shared socket for every later screen process: a receive
    # low-water mark no request reaches leaves them serving nothing
    attempt("a low-water mark on the listening socket", lambda: listening.setsockopt(
        socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1 << 30))
    import fcntl
    own = os.open(os.path.join(os.path.dirname(controller_file), "__init__.py"), os.O_RDONLY)
    flags = fcntl.ioctl(own, 0x80086601, bytes(8))  # FS_IOC_GETFLAGS: still allowed
    attempt("inode flags set (chattr)", lambda: fcntl.ioctl(own, 0x40086602, flags))
    attempt("a lease that holds others back", lambda: fcntl.fcntl(own, 1024, fcntl.F_RDLCK))
    attempt("supplementary groups", lambda: os.setgroups(os.getgroups()))
    import threading
    ran = []
    worker = threading.Thread(target=lambda: ran.append(1))
    worker.start(); worker.join()
    tried["a thread of its own"] = "done" if ran else "refused"
    # what a screen process does need, still there: its pages, a late import, its words
    import controller.display, email.mime.text
    page = os.path.join(os.path.dirname(controller.display.__file__), "static")
    attempt("its own pages", lambda: os.listdir(page))
    print(json.dumps(tried))
""")

# the daemon: the journal open on descriptor 3, then the screen process started
PARENT = textwrap.dedent("""
    import os, sqlite3, subprocess, sys
    state, attacker, port = sys.argv[1], sys.argv[2], sys.argv[3]
    fd = os.open(os.path.join(state, "journal.sqlite"), os.O_RDONLY)
    os.dup2(fd, 3)
    import socket
    listening = socket.create_server(("127.0.0.1", 0))
    os.dup2(listening.fileno(), 4)
    done = subprocess.run([sys.executable, "-P", "-c", attacker, state, port], pass_fds=(3, 4),
                          capture_output=True, text=True, timeout=60)
    sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)
""")


def test_a_screen_process_taken_over_reaches_no_card(tmp_path: Path) -> None:
    abi = landlock_abi()
    state = tmp_path / "state"
    state.mkdir()
    subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
                    "c.execute('create table records (body)');"
                    "c.execute(\"insert into records values ('{\\\"card\\\": \\\"7C\\\"}')\");"
                    "c.commit()", str(state / "journal.sqlite")], check=True)
    (state / "journal.sqlite").chmod(0o640)
    (state / "journal.key").write_bytes(b"k" * 32)
    listener = socket.create_server(("127.0.0.1", 0))
    control = socket.socket(socket.AF_UNIX)  # the daemon's control socket, listening
    control.bind(str(state / "control.sock"))
    control.listen()
    try:
        done = subprocess.run([sys.executable, "-c", PARENT, str(state), ATTACKER,
                               str(listener.getsockname()[1])], capture_output=True, text=True,
                              cwd=REPO, timeout=120)
    finally:
        listener.close()
        control.close()
    assert done.returncode == 0, done.stderr
    tried = json.loads(done.stdout)
    refused = {name: outcome for name, outcome in tried.items() if outcome != "done"}
    assert {"journal by its path", "the key beside it", "the parent's descriptors",
            "the parent's journal descriptor", "the parent's environment", "a file written",
            "a file written elsewhere"} <= set(refused), tried
    assert not (state / "planted").exists() and not (tmp_path / "planted-elsewhere").exists()
    # Landlock leaves a socket reached by its path open: the system call filter shuts it,
    # and every new socket and process with it; threads still run
    assert {"the control socket", "a datagram out", "a child that would outlive the daemon",
            "another program"} <= set(refused), tried
    assert {"the journal's mode", "the key's owner", "the journal's times",
            "an attribute on the journal", "a ring for io_uring",
            "the parent-death signal turned off", "an identity change",
            "a filter locked on the listening socket", "a low-water mark on the listening socket",
            "inode flags set (chattr)", "a lease that holds others back",
            "supplementary groups"} <= set(refused), tried
    assert (state / "journal.sqlite").stat().st_mode & 0o777 == 0o640
    assert tried["a thread of its own"] == "done", tried
    if abi >= 4:
        assert "a connection out" in refused, tried
    if abi >= 6:
        assert "a signal to the parent" in refused, tried
    assert tried["its own pages"] == "done", tried


def test_a_thread_already_running_is_said_and_nothing_is_shut_in() -> None:
    landlock_abi()
    code = textwrap.dedent("""
        import threading, time
        from controller.service.screens.sandbox import shut_in
        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
        try:
            shut_in([])
        except OSError as exc:
            print(exc.strerror)
        print(len(open("/etc/hostname").read()) > 0)  # not shut in: /etc is still readable
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "threads are running already: they would stay outside", "True"], done.stdout


def test_a_clone_on_the_import_path_is_listed_never_read(tmp_path: Path) -> None:
    """Run from a clone with PYTHONPATH naming its root, an operator's state folder or key
    in the clone would be beneath a readable folder: the root is only listed (a late import
    needs its names); its files (here the README) are not read, the package's are."""
    landlock_abi()
    code = textwrap.dedent("""
        import json, os, sys
        from controller.service.screens.child import listable_folders, readable_folders
        from controller.service.screens.sandbox import shut_in
        root = sys.argv[1]
        readable, listable = readable_folders(), listable_folders()
        shut_in(readable, listable)
        tried = {"readable": readable, "listable": listable}
        readme = os.path.join(root, "README.md")
        for name, action in (("names", lambda: os.listdir(root)),
                             ("a file in the root", lambda: open(readme).read()),
                             ("the package", lambda: os.listdir(os.path.join(root, "controller")))):
            try:
                action()
                tried[name] = "done"
            except OSError as exc:
                tried[name] = type(exc).__name__
        print(json.dumps(tried))
    """)
    done = subprocess.run([sys.executable, "-P", "-c", code, str(REPO)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    tried = json.loads(done.stdout)
    assert str(REPO) not in tried["readable"] and tried["listable"] == [str(REPO)], tried
    assert tried["names"] == tried["the package"] == "done", tried
    assert tried["a file in the root"] == "PermissionError", tried


def test_a_folder_given_to_list_only_shows_its_names_not_its_files(tmp_path: Path) -> None:
    landlock_abi()
    (tmp_path / "journal.key").write_text("k" * 32)
    code = textwrap.dedent("""
        import json, os, sys
        from controller.service.screens.sandbox import shut_in
        folder = sys.argv[1]
        shut_in([], [folder])
        names = os.listdir(folder)
        try:
            open(os.path.join(folder, "journal.key")).read()
            read = "done"
        except OSError as exc:
            read = type(exc).__name__
        print(json.dumps([names, read]))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["journal.key"], "PermissionError"]


@pytest.mark.slow
def test_the_daemons_screen_process_is_shut_in_before_it_serves(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    abi = landlock_abi()
    port = free_port()
    config = daemon_config(short_dir, short_dir / "shoe", devices[1].path,
                           display={"listen": f"127.0.0.1:{port}"})
    with running_daemon(config, short_dir, devices[1]) as (_, log):
        # its lines reach the daemon's log through the relay, its own fields under "screen"
        relayed = "screens: screens: sandboxed"
        wait_until(lambda: log_records(log, relayed), SCREENS_S,
                   "the screen process's sandbox line")
        [line] = [record["screen"] for record in log_records(log, relayed)]
        [started] = log_records(log, "screens: screen process started")
        status = Path(f"/proc/{started['pid']}/status").read_text()
        assert "NoNewPrivs:\t1" in status
        wait_until(lambda: players_state(port), SCREENS_S, "the players' state")  # it serves
    assert line["abi"] == abi
    state = str(short_dir / "state")
    assert not any(folder == state or folder.startswith(state + "/")
                   for folder in line["readable"])


HANDED = textwrap.dedent("""
    import os, sys
    from controller.service.screens.child import drop_inherited_descriptors
    if sys.argv[1] == "drop":
        drop_inherited_descriptors()
    try:
        print(os.read(9, 100).decode())
    except OSError as exc:
        print(type(exc).__name__)
""")


@pytest.mark.parametrize(("drop", "seen"), [("drop", "OSError"), ("keep", "a secret")])
def test_a_descriptor_the_daemon_was_handed_does_not_reach_the_screen_process(
        tmp_path: Path, drop: str, seen: str) -> None:
    """A shell's ``9<secret`` passes through the daemon to its children unasked: the screen
    process closes it first (``keep``: without that, it reads the secret)."""
    secret = tmp_path / "secret"
    secret.write_text("a secret")
    with secret.open("rb") as handed:
        done = subprocess.run(
            [sys.executable, "-c", f"import os; os.dup2({handed.fileno()}, 9); "
             f"os.execv({sys.executable!r}, [{sys.executable!r}, '-c', {HANDED!r}, {drop!r}])"],
            capture_output=True, text=True, cwd=REPO, timeout=60, pass_fds=(handed.fileno(),))
    assert done.stdout.strip() == seen, done  # EBADF is a plain OSError
