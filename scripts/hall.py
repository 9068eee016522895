"""A lecture hall on one machine: PostgreSQL holds the class poll, N Streamlit replicas serve the app, nginx in front.

    python3 scripts/hall.py start [--replicas 2] [--port 8500] [--listen 127.0.0.1] [--db-port 5433]
                                  [--database URL] [--run-dir /tmp/attention-lab-hall]
    python3 scripts/hall.py status [--run-dir DIR]
    python3 scripts/hall.py stop [--run-dir DIR]

`start` prints the address the class opens (nginx, on --listen:--port) and returns; the processes run
on until `stop`. The replicas listen on 127.0.0.1 at the --replicas ports after --port (8501, 8502, …),
each a `streamlit run app.py` whose ATTENTION_LAB_DB names the one database, so a teacher on one
replica and students on another share one poll. Without --database a throwaway PostgreSQL cluster is
made in the run folder (Debian's initdb and pg_ctl, trust authentication on loopback, --db-port) and
deleted by `stop`; with --database URL the replicas use that server instead. The proxy's config is
deploy/nginx-hall.conf with the ports filled in: sticky sessions by a cookie, WebSocket upgrades passed
through; every response names the replica that served it in the X-Hall-Replica header.

Everything a hall writes stays in the run folder: hall.json (what runs where), the replicas' logs,
nginx's config and logs, the cluster. Needs Debian's nginx and postgresql packages
(`apt-get install nginx postgresql`).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NGINX_TEMPLATE = ROOT / "deploy" / "nginx-hall.conf"
DEFAULT_RUN_DIR = Path(tempfile.gettempdir()) / "attention-lab-hall"
STATE_FILE = "hall.json"
DATABASE = "attention_lab"
REPLICA_HEADER = "X-Hall-Replica"
STICKY_COOKIE = "hall_replica"
START_TIMEOUT_S = 120.0  # a replica imports Streamlit and torch before it answers; two cores, shared
STOP_TIMEOUT_S = 15.0


class HallError(RuntimeError):
    """Something the person at the terminal can fix; the message says what."""


# --- processes ------------------------------------------------------------------------------------

def alive(pid: int | None) -> bool:
    """The process runs (a zombie, ended but not yet reaped by its parent, does not)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_group(pid: int | None) -> None:
    """SIGTERM to the process group that `pid` leads, then SIGKILL to whatever is left after STOP_TIMEOUT_S."""
    if not alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def check_port_free(address: str, port: int, what: str, option: str) -> None:
    with socket.socket() as s:
        # as the servers themselves do: a port whose last connections are closing (TIME_WAIT) is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise HallError(f"port {port} on {address} ({what}) is not free: {exc.strerror}. "
                            f"Stop what uses it, or pick other ports with {option}.") from None


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on loopback (for a hall on ports nobody chose: tests, benchmarks)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        try:
            for port in range(first, first + count):
                check_port_free("127.0.0.1", port, "", "")
        except HallError:
            continue
        return first
    raise HallError(f"no {count} consecutive free ports found on 127.0.0.1")


def http_ok(url: str) -> bool:
    """The URL answered 200."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except OSError:  # refused, timed out, or an HTTP error (urllib's URLError is an OSError)
        return False


def log_tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"\nlast lines of {path}:\n" + "\n".join(text)


# --- PostgreSQL -----------------------------------------------------------------------------------

def postgres_programs() -> Path:
    """The folder holding Debian's initdb and pg_ctl (the newest version), else the one on PATH holding both."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    raise HallError("PostgreSQL's server programs (initdb, pg_ctl) were not found under "
                    "/usr/lib/postgresql/<version>/bin or on PATH: install Debian's server with "
                    "`apt-get install -y postgresql`, or give a running server with --database URL.")


class PostgresCluster:
    """A throwaway PostgreSQL cluster in a folder of its own: initdb, pg_ctl start and stop.

    Trust authentication on 127.0.0.1 and a unix socket in the folder; otherwise PostgreSQL's own
    settings (fsync on: what the benchmarks measure is what a class gets). As root, the server runs
    as Debian's `postgres` user: initdb refuses root.
    """

    def __init__(self, folder: Path, port: int):
        self.folder, self.port = folder, port
        self.data, self.log = folder / "data", folder / "server.log"
        self.bin = postgres_programs()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise HallError("running as root and there is no `postgres` user to run the PostgreSQL "
                                "server as: Debian's postgresql package creates it") from None
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def create(self) -> None:
        """A new cluster, started."""
        self.folder.mkdir(parents=True, exist_ok=True)  # a stopped hall left its server.log there
        if self.as_user:
            run_dir = self.folder.parent  # the postgres user passes through it to reach its own folder
            run_dir.chmod(run_dir.stat().st_mode | 0o111)
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            if subprocess.run([*self.as_user, "test", "-w", str(self.folder)]).returncode:
                raise HallError(f"the postgres user cannot write to {self.folder}: "
                                "pick a run folder it can reach, e.g. --run-dir /tmp/attention-lab-hall")
        self._run("initdb", "-D", str(self.data), "-U", "lab", "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o",
                  f"-k {self.folder} -p {self.port} -c listen_addresses=127.0.0.1 "
                  "-c max_connections=300", "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://lab@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / program), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise HallError(f"{program} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
                            + log_tail(self.log))


def check_database(url: str) -> None:
    try:
        import psycopg
    except ImportError:
        raise HallError("psycopg is not installed: pip install -r requirements.txt") from None
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        raise HallError(f"--database: cannot connect: {str(exc).strip()}") from None


# --- the hall -------------------------------------------------------------------------------------

def nginx_program() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.path.exists(p)), None)
    if found is None:
        raise HallError("nginx is not installed: `apt-get install -y nginx` (Debian's package; the hall runs its "
                        "own nginx from the run folder, the system's nginx service is not used)")
    return found


def nginx_config(run_dir: Path, listen: str, port: int, replica_ports: list[int]) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;" for p in replica_ports)
    fields = {"@RUN@": str(run_dir / "nginx"), "@LISTEN@": f"{listen}:{port}", "@SERVERS@": servers,
              "@COOKIE@": STICKY_COOKIE, "@REPLICA_HEADER@": REPLICA_HEADER}
    text = NGINX_TEMPLATE.read_text()
    for field, value in fields.items():
        text = text.replace(field, value)
    return text


def start_replica(port: int, database_url: str, log: Path) -> int:
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
               # a served class does not reload on edits: no file watcher in every replica
               "--server.fileWatcherType", "none",
               # Streamlit's full garbage collection after every script run walks every object of every
               # session the process holds: with a hundred students polling every 2 s it took most of
               # the CPU (docs/benchmarks.md, "A lecture hall"). Python's own collector still runs.
               "--runner.postScriptGC", "false"]
    with open(log, "w") as out:
        # a session of its own: it outlives this command, and `stop` ends its whole process group
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "ATTENTION_LAB_DB": database_url}, start_new_session=True)
    return process.pid


def wait_until(ready, what: str, pids: list[int], logs: list[Path]) -> None:
    """Until ready() is true; a process in `pids` that ends first, or START_TIMEOUT_S, raises with its log."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        for pid, log in zip(pids, logs):
            if not alive(pid):
                raise HallError(f"{what}: process {pid} ended before answering" + log_tail(log))
        if time.monotonic() > deadline:
            raise HallError(f"{what} did not answer within {START_TIMEOUT_S:.0f} s"
                            + "".join(log_tail(log) for log in logs))
        time.sleep(0.3)


def read_state(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None


def write_state(run_dir: Path, state: dict) -> None:
    path = run_dir / STATE_FILE
    path.write_text(json.dumps(state, indent=1))
    path.chmod(0o600)  # a --database URL may hold a password


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def start(run_dir: Path, replicas: int, port: int, listen: str, db_port: int, database: str | None) -> str:
    """Start the hall; the proxy's URL. Whatever started is stopped again if a later part fails."""
    run_dir = run_dir.resolve()
    if read_state(run_dir) is not None:
        if any(up for _, _, up, _ in status(run_dir)):
            raise HallError(f"a hall already runs from {run_dir}: see `hall.py status`, or `hall.py stop` it first")
        stop(run_dir)  # what an earlier hall left behind
    if replicas < 1:
        raise HallError(f"--replicas {replicas}: a hall needs at least one replica")
    nginx = nginx_program()
    replica_ports = [port + i for i in range(1, replicas + 1)]
    check_port_free(listen, port, "the proxy", "--port")
    for p in replica_ports:
        check_port_free("127.0.0.1", p, "a replica", f"--port (the replicas take the {replicas} after it)")
    cluster = None
    if database is None:
        check_port_free("127.0.0.1", db_port, "PostgreSQL", "--db-port")
        cluster = PostgresCluster(run_dir / "postgres", db_port)
    else:
        check_database(database)

    run_dir.mkdir(parents=True, exist_ok=True)
    state = dict(run_dir=str(run_dir), proxy_url=f"http://{'127.0.0.1' if listen == '0.0.0.0' else listen}:{port}",
                 postgres=None, database_url=database, replicas=[], nginx=None)
    write_state(run_dir, state)
    try:
        if cluster is not None:
            cluster.create()
            state["postgres"] = dict(folder=str(cluster.folder), port=db_port)
            state["database_url"] = cluster.create_database(DATABASE)
            write_state(run_dir, state)
            say(f"PostgreSQL on 127.0.0.1:{db_port}, database {DATABASE}, data in {cluster.data}")
        for i, p in enumerate(replica_ports, 1):
            log = run_dir / f"replica-{i}.log"
            state["replicas"].append(dict(port=p, pid=start_replica(p, state["database_url"], log), log=str(log)))
            write_state(run_dir, state)
        wait_until(lambda: all(http_ok(f"http://127.0.0.1:{r['port']}/_stcore/health") for r in state["replicas"]),
                   "the replicas", [r["pid"] for r in state["replicas"]], [Path(r["log"]) for r in state["replicas"]])
        for i, r in enumerate(state["replicas"], 1):
            say(f"replica {i}: http://127.0.0.1:{r['port']} (pid {r['pid']}, log {r['log']})")

        folder = run_dir / "nginx"
        (folder / "tmp").mkdir(parents=True, exist_ok=True)
        (folder / "nginx.conf").write_text(nginx_config(run_dir, listen, port, replica_ports))
        state["nginx"] = dict(folder=str(folder), port=port, listen=listen)
        write_state(run_dir, state)
        done = subprocess.run([nginx, "-p", f"{folder}/", "-c", str(folder / "nginx.conf"),
                               "-e", str(folder / "error.log")], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise HallError(f"nginx did not start ({done.returncode}): {done.stderr.strip()}"
                            + log_tail(folder / "error.log"))
        wait_until(lambda: http_ok(f"{state['proxy_url']}/_stcore/health"), "the proxy", [], [folder / "error.log"])
        say(f"nginx: {listen}:{port} -> {replicas} replica{'s' if replicas > 1 else ''}, "
            f"sticky by the cookie {STICKY_COOKIE}, config {folder / 'nginx.conf'}")
    except BaseException:
        stop(run_dir)
        raise
    return state["proxy_url"]


def nginx_pid(state: dict) -> int | None:
    if not state.get("nginx"):
        return None
    try:
        return int((Path(state["nginx"]["folder"]) / "nginx.pid").read_text())
    except (OSError, ValueError):
        return None


def status(run_dir: Path) -> list[tuple[str, int | None, bool, str]]:
    """(part, pid, running and answering, where) for each part of the hall in `run_dir`."""
    state = read_state(run_dir.resolve())
    if state is None:
        return []
    rows = []
    if state["postgres"]:
        cluster = PostgresCluster(Path(state["postgres"]["folder"]), state["postgres"]["port"])
        pid = cluster.pid()
        rows.append(("PostgreSQL", pid, alive(pid), state["database_url"]))
    for i, r in enumerate(state["replicas"], 1):
        where = f"http://127.0.0.1:{r['port']}"
        rows.append((f"replica {i}", r["pid"], alive(r["pid"]) and http_ok(f"{where}/_stcore/health"), where))
    if state["nginx"]:
        pid = nginx_pid(state)
        rows.append(("nginx", pid, alive(pid) and http_ok(f"{state['proxy_url']}/_stcore/health"),
                     state["proxy_url"]))
    return rows


def stop(run_dir: Path) -> list[str]:
    """Stop every part of the hall in `run_dir`, the proxy first; what was stopped. The logs stay."""
    run_dir = run_dir.resolve()
    state = read_state(run_dir)
    if state is None:
        return []
    stopped = []
    pid = nginx_pid(state)
    if alive(pid):
        stop_group(pid)  # nginx made itself a session leader; SIGTERM closes the open WebSockets at once
        stopped.append(f"nginx (pid {pid})")
    for i, r in enumerate(state["replicas"], 1):
        if alive(r["pid"]):
            stop_group(r["pid"])
            stopped.append(f"replica {i} (pid {r['pid']})")
    if state["postgres"]:
        cluster = PostgresCluster(Path(state["postgres"]["folder"]), state["postgres"]["port"])
        pid = cluster.pid()
        if alive(pid):
            cluster.stop()
            stopped.append(f"PostgreSQL (pid {pid})")
        shutil.rmtree(cluster.data, ignore_errors=True)  # a throwaway cluster; its server.log stays
    (run_dir / STATE_FILE).unlink()
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    begin = commands.add_parser("start", help="start PostgreSQL, the replicas and nginx; print the proxy's URL")
    begin.add_argument("--replicas", type=int, default=2, help="Streamlit processes (default 2; one or two per core)")
    begin.add_argument("--port", type=int, default=8500,
                       help="the proxy's port (default 8500); the replicas take the ports after it")
    begin.add_argument("--listen", default="127.0.0.1",
                       help="the proxy's address (default 127.0.0.1; 0.0.0.0 lets the class's laptops in)")
    begin.add_argument("--db-port", type=int, default=5433, help="the throwaway PostgreSQL's port (default 5433)")
    begin.add_argument("--database", metavar="URL",
                       help="use this PostgreSQL database (postgresql://user:password@host:port/dbname) "
                            "instead of starting one")
    for command in (begin, commands.add_parser("status", help="what runs, and whether it answers"),
                    commands.add_parser("stop", help="stop the proxy, the replicas and the throwaway PostgreSQL")):
        command.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR,
                             help=f"where the hall keeps its state, logs and cluster (default {DEFAULT_RUN_DIR})")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(start(args.run_dir, args.replicas, args.port, args.listen, args.db_port, args.database))
            return 0
        if args.command == "stop":
            stopped = stop(args.run_dir)
            say(f"stopped {', '.join(stopped)}" if stopped else f"no hall runs from {args.run_dir}")
            return 0
        rows = status(args.run_dir)
        if not rows:
            say(f"no hall runs from {args.run_dir}")
            return 3
        for part, pid, up, where in rows:
            print(f"{part:<11} {'up' if up else 'DOWN':<5} pid {pid or '-':<8} {where}")
        return 0 if all(up for _, _, up, _ in rows) else 1
    except HallError as exc:
        say(f"hall.py {args.command}: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
