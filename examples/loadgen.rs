//! imrelay's load generator: drives the real HTTP API on loopback and reports throughput,
//! latency and memory. See BENCHMARKS.md for the method and the figures.
//!
//! ```sh
//! cargo build --release --examples --bins
//! # everything, in one run (spawns the servers itself):
//! target/release/examples/loadgen suite --imrelay target/release/imrelay
//! # or piece by piece, against a running server:
//! target/release/examples/loadgen cycle --url http://127.0.0.1:8787 --agents 32 --duration 10
//! target/release/examples/loadgen pending --url http://127.0.0.1:8787 --count 100000 --waiters 10000 --pid <server pid>
//! target/release/examples/loadgen ceiling --listen 127.0.0.1:8788
//! target/release/examples/loadgen flood --url http://127.0.0.1:8787 --slow 1000 --idle 600 --duration 30 --pid <server pid>
//! target/release/examples/loadgen stalled --url http://127.0.0.1:8787 --clients 2000 --events 1000 --input-kb 200 --pid <server pid>
//! target/release/examples/loadgen hooks --url http://127.0.0.1:8787 --agents 16 --duration 10
//! target/release/examples/loadgen mcp --url http://127.0.0.1:8787 --sessions 20000 --streams 1100 --pid <server pid>
//! # two replicas on one PostgreSQL: wait on one, answer on the other
//! target/release/examples/loadgen cycle --url http://127.0.0.1:8787 --respond-url http://127.0.0.1:8788 --pid <a>,<b> --db-cpu
//! # several replicas on PostgreSQL next to SQLite (spawns the servers, a new schema per run):
//! target/release/examples/loadgen replicas --imrelay target/release/imrelay --postgres-url postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! Traffic goes only to loopback addresses, and every run is bounded by a duration and a
//! count.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::routing::{get, post};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[path = "loadgen/hooks.rs"]
mod hooks;
#[path = "loadgen/mcp.rs"]
mod mcp;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Load generator for imrelay (loopback only)")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// N agents loop create → wait (in flight) → respond → wait returns.
    Cycle {
        /// Where agents create and wait; several (comma-separated) split the agents across
        /// them (agent i uses the i-th, round robin).
        #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:8787")]
        url: Vec<String>,
        /// Where agents send their answers, if not where they wait (another replica on the
        /// same store); several (comma-separated) are shared out round robin like `--url`.
        #[arg(long, value_delimiter = ',')]
        respond_url: Vec<String>,
        #[arg(long, default_value_t = 32)]
        agents: usize,
        /// Seconds to run (after a 2 s warm-up).
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// Stop after this many cycles in all.
        #[arg(long, default_value_t = 5_000_000)]
        max_cycles: u64,
        /// The server's process id, to report its CPU time per cycle (several, comma-separated,
        /// are summed: the replicas of one run).
        #[arg(long, value_delimiter = ',')]
        pid: Vec<u32>,
        /// Also report the CPU time of this machine's PostgreSQL processes per cycle (for runs
        /// on a PostgreSQL store on this machine).
        #[arg(long)]
        db_cpu: bool,
        /// Microseconds each agent waits between sending its wait and the answer (a person's
        /// reaction time, compressed), so answers find the wait parked.
        #[arg(long, default_value_t = 0)]
        think_us: u64,
        /// Write the result as JSON here too.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Create N pending interactions, hold W long-poll waiters, report server memory.
    Pending {
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        url: String,
        #[arg(long, default_value_t = 100_000)]
        count: usize,
        #[arg(long, default_value_t = 10_000)]
        waiters: usize,
        /// The server's process id (to read its resident memory).
        #[arg(long)]
        pid: u32,
        /// Give up creating the interactions after this many seconds.
        #[arg(long, default_value_t = 120)]
        create_timeout_secs: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Hold slow-loris and idle connections against a running server while probing /livez:
    /// when the server closes them, how /livez fares meanwhile, the server's memory.
    Flood {
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        url: String,
        /// Connections that trickle a request head that never ends, one byte every
        /// `--trickle-secs`.
        #[arg(long, default_value_t = 1000)]
        slow: usize,
        #[arg(long, default_value_t = 5)]
        trickle_secs: u64,
        /// Connections opened and left silent.
        #[arg(long, default_value_t = 0)]
        idle: usize,
        /// Seconds to hold the flood and probe.
        #[arg(long, default_value_t = 30)]
        duration: u64,
        /// Open a new connection 100 ms after the server closes one (a sustained flood).
        #[arg(long)]
        reconnect: bool,
        /// Milliseconds between /livez probes (each on a new connection, 5 s to answer).
        #[arg(long, default_value_t = 250)]
        probe_ms: u64,
        /// The server's process id (to read its resident memory).
        #[arg(long)]
        pid: Option<u32>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Hold event streams that never read while big interactions are created and answered:
    /// the server's memory meanwhile, and after the streams leave.
    Stalled {
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        url: String,
        /// Event streams opened (`GET /v1/events`) and never read.
        #[arg(long, default_value_t = 100)]
        clients: usize,
        /// Events to cause: each interaction created and then answered causes two.
        #[arg(long, default_value_t = 1000)]
        events: usize,
        /// The size of each interaction's input, in KiB.
        #[arg(long, default_value_t = 200)]
        input_kb: usize,
        /// The server's process id (to read its resident memory).
        #[arg(long)]
        pid: u32,
        /// Give up after this many seconds of creating and answering.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Simulated Claude Code sessions send their session hooks (`PostToolUse`, `Stop`) in a
    /// loop: the hooks' round trip through the server.
    Hooks {
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        url: String,
        /// Sessions, each on a connection of its own.
        #[arg(long, default_value_t = 16)]
        agents: usize,
        /// `PostToolUse` hooks per turn (then a `Stop`).
        #[arg(long, default_value_t = 4)]
        tools_per_turn: usize,
        /// Every N-th turn, queue a message for the session first (handed over by the
        /// turn's first `PostToolUse`).
        #[arg(long)]
        message_every: Option<usize>,
        /// Seconds to run (after a one-second warm-up).
        #[arg(long, default_value_t = 10)]
        duration: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Open MCP sessions and hold GET streams on `/mcp`: how many are accepted, the server's
    /// memory, whether the API is served meanwhile, and when idle sessions are closed.
    Mcp {
        #[arg(long, default_value = "http://127.0.0.1:8787")]
        url: String,
        /// Sessions to open (`initialize` and `initialized`).
        #[arg(long, default_value_t = 2000)]
        sessions: usize,
        /// GET streams to open and hold, each on a connection of its own, across the
        /// sessions opened.
        #[arg(long, default_value_t = 0)]
        streams: usize,
        /// After the streams are let go, wait up to this many seconds for every session to
        /// be closed as idle.
        #[arg(long)]
        watch_idle_secs: Option<u64>,
        /// The server's process id (to read its resident memory).
        #[arg(long)]
        pid: u32,
        /// Give up opening the sessions after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Several replicas on one PostgreSQL database (on this machine; a new schema per run,
    /// dropped after it) next to one SQLite server: wake latency with the answer on another
    /// replica, cycles per second, start-up with pending interactions.
    Replicas {
        /// The imrelay binary (a release build).
        #[arg(long, default_value = "target/release/imrelay")]
        imrelay: PathBuf,
        /// The PostgreSQL database (on this machine; the user may create schemas).
        #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
        postgres_url: String,
        /// What to measure, comma-separated: wake (light load, answers after a think time),
        /// cycles (full load), startup (pending interactions on PostgreSQL), startup-sqlite
        /// (the same on SQLite).
        #[arg(long, value_delimiter = ',', default_value = "wake,cycles,startup")]
        steps: Vec<String>,
        /// Agents in the cycles step.
        #[arg(long, default_value_t = 32)]
        agents: usize,
        /// Agents in the wake step.
        #[arg(long, default_value_t = 4)]
        light_agents: usize,
        /// The wake step's think time, microseconds.
        #[arg(long, default_value_t = 2000)]
        think_us: u64,
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// Runs per setup (interleaved); the median is reported.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        #[arg(long, default_value_t = 100_000)]
        pending: usize,
        #[arg(long, default_value_t = 10_000_000)]
        max_cycles: u64,
        #[arg(long, default_value_t = 120)]
        create_timeout_secs: u64,
        /// SQLite synchronous setting for the SQLite runs.
        #[arg(long, default_value = "normal")]
        synchronous: String,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Serve the stateless ceiling: the same three routes with canned JSON.
    Ceiling {
        #[arg(long, default_value = "127.0.0.1:8788")]
        listen: SocketAddr,
    },
    /// Run everything: ceiling, imrelay (memory and SQLite), pending, start-up; print a table.
    Suite {
        /// The imrelay binary (a release build).
        #[arg(long, default_value = "target/release/imrelay")]
        imrelay: PathBuf,
        #[arg(long, default_value_t = 32)]
        agents: usize,
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// Cycle runs per target (interleaved); the median is reported.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        #[arg(long, default_value_t = 100_000)]
        pending: usize,
        #[arg(long, default_value_t = 10_000)]
        waiters: usize,
        /// Stop each cycle run after this many cycles in all (its duration bounds it too).
        #[arg(long, default_value_t = 10_000_000)]
        max_cycles: u64,
        /// Give up creating the pending interactions after this many seconds.
        #[arg(long, default_value_t = 120)]
        create_timeout_secs: u64,
        /// SQLite synchronous setting for the SQLite runs.
        #[arg(long, default_value = "normal")]
        synchronous: String,
        /// Also run the `replicas` steps against this PostgreSQL database (on this machine).
        #[arg(long)]
        postgres_url: Option<String>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

// ---------------------------------------------------------------- HTTP client

/// One HTTP/1.1 keep-alive connection.
struct Conn {
    tx: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    async fn open(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            tx,
            host: addr.to_string(),
        })
    }

    async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> anyhow::Result<(u16, Bytes)> {
        self.tx.ready().await?;
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let resp = self.tx.send_request(req).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok((status, bytes))
    }
}

/// A keep-alive connection for long polls, written by hand: `send` returns once the request
/// is in the kernel's socket buffer, so the agent knows its wait is on its way before it sends
/// the answer (hyper hands a request to its connection task and gives no such signal). A
/// reader task timestamps each response as it arrives.
struct Waiter {
    write: tokio::net::tcp::OwnedWriteHalf,
    responses: tokio::sync::mpsc::Receiver<anyhow::Result<(u16, Instant)>>,
    host: String,
}

impl Waiter {
    async fn open(addr: SocketAddr) -> anyhow::Result<Waiter> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let (tx, responses) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let mut read = tokio::io::BufReader::new(read);
            loop {
                let r = read_response(&mut read).await;
                let failed = r.is_err();
                if tx.send(r).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Waiter {
            write,
            responses,
            host: addr.to_string(),
        })
    }

    async fn send_get(&mut self, path: &str) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
        self.write.write_all(req.as_bytes()).await?;
        Ok(())
    }

    /// The next response's status and when it arrived.
    async fn response(&mut self) -> anyhow::Result<(u16, Instant)> {
        self.responses
            .recv()
            .await
            .context("the long-poll connection closed")?
    }
}

/// Reads one HTTP/1.1 response (with a Content-Length body); returns its status and the time
/// its last byte arrived.
async fn read_response(
    read: &mut tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> anyhow::Result<(u16, Instant)> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut line = String::new();
    read.read_line(&mut line).await?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {line:?}"))?;
    let mut length = 0usize;
    loop {
        line.clear();
        if read.read_line(&mut line).await? == 0 {
            bail!("the connection closed mid-response");
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse()?;
        }
    }
    let mut body = vec![0u8; length];
    read.read_exact(&mut body).await?;
    Ok((status, Instant::now()))
}

fn loopback(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .context("the URL must start with http://")?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    let addr: SocketAddr = hostport
        .replace("localhost", "127.0.0.1")
        .parse()
        .context("the URL must name an IP address and port, e.g. http://127.0.0.1:8787")?;
    if !addr.ip().is_loopback() {
        bail!("loadgen only sends traffic to loopback addresses, not {addr}");
    }
    Ok(addr)
}

// ---------------------------------------------------------------- cycle mode

#[derive(Debug, serde::Serialize)]
struct CycleReport {
    target: String,
    agents: usize,
    seconds: f64,
    cycles: u64,
    errors: u64,
    cycles_per_sec: f64,
    cycle_us: Percentiles,
    /// From sending the answer to the wait's response. Without a think time the answer often
    /// arrives before the wait is parked, so this is then not a wake latency: see
    /// `waits_woken_share`.
    respond_to_wake_us: Option<Percentiles>,
    /// The agents' pause between sending the wait and the answer.
    think_us: u64,
    /// CPU time the server process used per recorded cycle (user + system), when its pid is
    /// known: a measure of its efficiency that does not depend on how busy the machine is.
    /// With several servers (replicas), the sum of theirs.
    server_cpu_us_per_cycle: Option<f64>,
    /// CPU time this machine's PostgreSQL processes used per recorded cycle (`--db-cpu`):
    /// the store's share of the work when it is a PostgreSQL server on the same cores.
    db_cpu_us_per_cycle: Option<f64>,
    /// The share of the machine's CPU time (all cores) that processes other than the
    /// servers, PostgreSQL and this load generator used during the recorded window: another
    /// program sharing the machine, which the figures should be read with.
    other_cpu_share: Option<f64>,
    /// How many servers the agents created and waited on.
    wait_servers: usize,
    /// Whether the answers went to other servers than the waits (another replica).
    answered_elsewhere: bool,
    /// Of the waits that returned an answer, the share that were parked when it arrived (the
    /// rest found it already answered), from the server's `imrelay_long_polls` counters.
    waits_woken_share: Option<f64>,
}

/// The `imrelay_long_polls_total` counters (woken, ready) summed over `addrs`, if every one
/// has them.
async fn long_polls_of(addrs: &[SocketAddr]) -> Option<(f64, f64)> {
    let mut sum = (0.0, 0.0);
    for a in addrs {
        let (w, r) = long_polls(*a).await?;
        sum.0 += w;
        sum.1 += r;
    }
    Some(sum)
}

/// The server's `imrelay_long_polls_total` counters (woken, ready), if it has them.
async fn long_polls(addr: SocketAddr) -> Option<(f64, f64)> {
    let mut c = Conn::open(addr).await.ok()?;
    let (status, body) = c.call("GET", "/metrics", None).await.ok()?;
    if status != 200 {
        return None;
    }
    let text = String::from_utf8_lossy(&body);
    let count = |outcome: &str| {
        let prefix = format!("imrelay_long_polls_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    Some((count("woken")?, count("ready")?))
}

#[derive(Debug, serde::Serialize, Clone, Copy)]
struct Percentiles {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    Percentiles {
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

/// CPU time (user + system) a process has used so far, in microseconds.
fn cpu_us(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start with the state (field 3);
    // utime and stime are fields 14 and 15, in clock ticks.
    let rest = stat.rsplit_once(')').context("unreadable stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..13)
        .context("short stat")?
        .iter()
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .sum();
    Ok(ticks as f64 * 1e6 / clock_ticks() as f64)
}

/// The machine's busy CPU time so far, over all cores (from `/proc/stat`), in microseconds.
fn machine_busy_us() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|i| f.get(*i)).sum();
    Some(busy as f64 * 1e6 / clock_ticks() as f64)
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

/// Waits (at most `bound`) until the machine is quiet: under a quarter of its CPU busy over
/// one second. Returns the busy share last seen.
async fn wait_quiet(bound: Duration) -> f64 {
    let start = Instant::now();
    loop {
        let (Some(a), t) = (machine_busy_us(), Instant::now()) else {
            return 0.0;
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(b) = machine_busy_us() else {
            return 0.0;
        };
        let share = (b - a) / (t.elapsed().as_secs_f64() * 1e6 * cores());
        if share < 0.25 || start.elapsed() >= bound {
            return share;
        }
    }
}

/// CPU time (user + system) used so far by each process of this machine named `postgres`
/// (the server and its backends), in microseconds.
fn postgres_cpu() -> std::collections::HashMap<u32, f64> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let is_postgres = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim_end() == "postgres");
        if is_postgres && let Ok(us) = cpu_us(pid) {
            out.insert(pid, us);
        }
    }
    out
}

/// The CPU time PostgreSQL's processes used between two [`postgres_cpu`] readings (a process
/// that started in between counts in full; one that ended in between is lost).
fn postgres_cpu_since(before: &std::collections::HashMap<u32, f64>) -> f64 {
    postgres_cpu()
        .into_iter()
        .map(|(pid, now)| now - before.get(&pid).copied().unwrap_or(0.0))
        .filter(|d| *d > 0.0)
        .sum()
}

/// Where a cycle run sends its traffic, and whose CPU time it reads.
#[derive(Clone, Debug, Default)]
struct Targets {
    /// Where agents create and wait: agent i uses the i-th, round robin.
    wait: Vec<SocketAddr>,
    /// Where agents answer (agent i: the i-th, round robin); empty: where they wait.
    respond: Vec<SocketAddr>,
    /// The servers whose CPU time is summed.
    pids: Vec<u32>,
    /// Whether to read this machine's PostgreSQL processes' CPU time too.
    db_cpu: bool,
}

impl Targets {
    /// One server, its pid if known.
    fn one(url: &str, pid: Option<u32>) -> anyhow::Result<Self> {
        Ok(Self {
            wait: vec![loopback(url)?],
            respond: Vec::new(),
            pids: pid.into_iter().collect(),
            db_cpu: false,
        })
    }

    /// Where agent `i` creates and waits, and where it answers.
    fn of_agent(&self, i: usize) -> (SocketAddr, SocketAddr) {
        let wait = self.wait[i % self.wait.len()];
        let respond = if self.respond.is_empty() {
            wait
        } else {
            self.respond[i % self.respond.len()]
        };
        (wait, respond)
    }

    /// The servers' CPU time so far (summed), if any pid is known.
    fn cpu(&self) -> anyhow::Result<Option<f64>> {
        if self.pids.is_empty() {
            return Ok(None);
        }
        let mut sum = 0.0;
        for pid in &self.pids {
            sum += cpu_us(*pid)?;
        }
        Ok(Some(sum))
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when that cannot be asked).
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

async fn run_cycles(
    targets: &Targets,
    agents: usize,
    duration: Duration,
    max_cycles: u64,
    label: &str,
    think: Duration,
) -> anyhow::Result<CycleReport> {
    if targets.wait.is_empty() {
        bail!("no server to send the cycles to");
    }
    let warmup = Duration::from_secs(2);
    let recording = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // Signalled by the agent whose cycle is the last one allowed (`max_cycles`).
    let full = Arc::new(tokio::sync::Notify::new());
    let cycle_h = Arc::new(Mutex::new(hist()));
    let wake_h = Arc::new(Mutex::new(hist()));
    let run_id = uuid::Uuid::now_v7().simple().to_string();
    let mut tasks = Vec::new();
    for agent in 0..agents {
        let (recording, stop, cycles, errors, full) = (
            recording.clone(),
            stop.clone(),
            cycles.clone(),
            errors.clone(),
            full.clone(),
        );
        let (cycle_h, wake_h) = (cycle_h.clone(), wake_h.clone());
        let run_id = run_id.clone();
        let (addr, answer_addr) = targets.of_agent(agent);
        tasks.push(tokio::spawn(async move {
            let mut main = Conn::open(addr).await?;
            let mut waiter = Waiter::open(addr).await?;
            // A third connection when the answers go to another server (replica).
            let mut elsewhere = if answer_addr == addr {
                None
            } else {
                Some(Conn::open(answer_addr).await?)
            };
            let mut local_cycle = hist();
            let mut local_wake = hist();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = format!("lg-{run_id}-{agent}-{n}");
                let t0 = Instant::now();
                let body = json!({"id": id, "tool_name": "Bash", "agent": "loadgen",
                    "input": {"command": format!("echo cycle {n}"), "description": "load generator cycle"}})
                    .to_string();
                let (s, _) = main.call("POST", "/v1/interactions", Some(body)).await?;
                if s != 201 {
                    if recording.load(Ordering::Relaxed) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                let path = format!("/v1/interactions/{id}/wait?timeout_secs=30");
                // The wait leaves first; the answer follows once it is on the wire (and, with
                // a think time, once the person has "read" the request).
                waiter.send_get(&path).await?;
                if !think.is_zero() {
                    tokio::time::sleep(think).await;
                }
                let t1 = Instant::now();
                let answerer = match elsewhere.as_mut() {
                    Some(c) => c,
                    None => &mut main,
                };
                let (s, _) = answerer
                    .call("POST", &format!("/v1/interactions/{id}/respond"), Some(r#"{"decision":"allow","by":"loadgen"}"#.to_string()))
                    .await?;
                let (ws, t2) = waiter.response().await?;
                if !recording.load(Ordering::Relaxed) {
                    continue;
                }
                if s != 200 || ws != 200 {
                    errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // Cycles past the maximum are not counted: the agent that takes the last
                // one ends the recording, and every agent stops there.
                let taken = cycles.fetch_add(1, Ordering::Relaxed) + 1;
                if taken > max_cycles {
                    break;
                }
                let _ = local_cycle.record((t2 - t0).as_micros().max(1) as u64);
                let _ = local_wake.record(t2.saturating_duration_since(t1).as_micros().max(1) as u64);
                if taken == max_cycles {
                    stop.store(true, Ordering::Relaxed);
                    full.notify_one();
                    break;
                }
            }
            cycle_h.lock().await.add(&local_cycle).ok();
            wake_h.lock().await.add(&local_wake).ok();
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(warmup).await;
    let mut waited_on = targets.wait.clone();
    waited_on.sort();
    waited_on.dedup();
    let cpu_before = targets.cpu()?;
    let db_before = postgres_cpu();
    let own_before = cpu_us(std::process::id())?;
    let machine_before = machine_busy_us();
    let polls_before = long_polls_of(&waited_on).await;
    recording.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let _ = tokio::time::timeout(duration, full.notified()).await;
    recording.store(false, Ordering::Relaxed);
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = targets.cpu()?;
    let db_used = postgres_cpu_since(&db_before);
    let own_used = cpu_us(std::process::id())? - own_before;
    let other_cpu_share = match (machine_before, machine_busy_us()) {
        (Some(a), Some(b)) => {
            let servers = match (cpu_before, cpu_after) {
                (Some(x), Some(y)) => y - x,
                _ => 0.0,
            };
            let other = (b - a) - servers - db_used - own_used;
            Some((other / (seconds * 1e6 * cores())).max(0.0))
        }
        _ => None,
    };
    let polls_after = long_polls_of(&waited_on).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    let n = cycles.load(Ordering::Relaxed).min(max_cycles);
    let cycle = percentiles(&*cycle_h.lock().await);
    let wake = percentiles(&*wake_h.lock().await);
    Ok(CycleReport {
        target: label.to_string(),
        agents,
        seconds,
        cycles: n,
        errors: errors.load(Ordering::Relaxed),
        cycles_per_sec: n as f64 / seconds,
        cycle_us: cycle,
        respond_to_wake_us: Some(wake),
        think_us: think.as_micros() as u64,
        server_cpu_us_per_cycle: match (cpu_before, cpu_after) {
            (Some(a), Some(b)) if n > 0 => Some((b - a) / n as f64),
            _ => None,
        },
        db_cpu_us_per_cycle: (targets.db_cpu && n > 0).then(|| db_used / n as f64),
        other_cpu_share,
        wait_servers: waited_on.len(),
        answered_elsewhere: (0..agents).any(|i| {
            let (w, r) = targets.of_agent(i);
            w != r
        }),
        waits_woken_share: match (polls_before, polls_after) {
            (Some((w0, r0)), Some((w1, r1))) if (w1 - w0) + (r1 - r0) > 0.0 => {
                Some((w1 - w0) / ((w1 - w0) + (r1 - r0)))
            }
            _ => None,
        },
    })
}

// ---------------------------------------------------------------- ceiling server

// The canned answers are imrelay's own (curl against a debug build), with an id and command
// like the agents' (`lg-<run id>-<agent>-<n>`, `echo cycle <n>`; agent 12, cycle 34567):
// create 376 bytes, respond and wait 922 bytes each, in imrelay and here alike (imrelay's are
// a byte shorter for each time whose milliseconds end in a zero, which it leaves out).
const CANNED_INTERACTION: &str = r#"{"id":"lg-0190f1e2a3b4c5d6e7f8091a2b3c4d5e-12-34567","kind":"approval","status":"pending","tool_name":"Bash","input":{"command":"echo cycle 34567","description":"load generator cycle"},"session":null,"agent":"loadgen","title":null,"description":null,"cwd":null,"created_at":"2026-11-22T08:35:49.072Z","deadline":"2026-11-22T08:40:49.072Z","timeout_secs":300,"resolution":null}"#;
const CANNED_RESOLVED: &str = r#"{"status":"resolved","result":{"behavior":"allow","updatedInput":{"command":"echo cycle 34567","description":"load generator cycle"}},"resolution":{"outcome":"allowed","by":"loadgen","via":"api","at":"2026-11-22T08:35:49.080Z","result":{"behavior":"allow","updatedInput":{"command":"echo cycle 34567","description":"load generator cycle"}}},"interaction":{"id":"lg-0190f1e2a3b4c5d6e7f8091a2b3c4d5e-12-34567","kind":"approval","status":"resolved","tool_name":"Bash","input":{"command":"echo cycle 34567","description":"load generator cycle"},"session":null,"agent":"loadgen","title":null,"description":null,"cwd":null,"created_at":"2026-11-22T08:35:49.072Z","deadline":"2026-11-22T08:40:49.072Z","timeout_secs":300,"resolution":{"outcome":"allowed","by":"loadgen","via":"api","at":"2026-11-22T08:35:49.080Z","result":{"behavior":"allow","updatedInput":{"command":"echo cycle 34567","description":"load generator cycle"}}}}}"#;

fn canned(status: u16, body: &'static str) -> axum::response::Response {
    axum::response::IntoResponse::into_response((
        axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::OK),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    ))
}

/// The ceiling: a stateless axum server with the same routes, reading the same bodies and
/// answering canned JSON of the same size.
async fn serve_ceiling(listen: SocketAddr) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/v1/interactions",
            post(|_b: axum::body::Bytes| async { canned(201, CANNED_INTERACTION) }),
        )
        .route(
            "/v1/interactions/{id}/wait",
            get(|| async { canned(200, CANNED_RESOLVED) }),
        )
        .route(
            "/v1/interactions/{id}/respond",
            post(|_b: axum::body::Bytes| async { canned(200, CANNED_RESOLVED) }),
        )
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!("ceiling server on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

// ---------------------------------------------------------------- stalled mode

#[derive(Debug, serde::Serialize)]
struct StalledReport {
    clients: usize,
    /// Streams the server accepted (answered 200 before the load began).
    clients_accepted: usize,
    events: usize,
    input_bytes: usize,
    rss_idle_bytes: u64,
    rss_with_clients_bytes: u64,
    /// Resident memory once the events were sent (stable, or after 10 s).
    rss_after_events_bytes: u64,
    /// The highest resident memory the server reached (VmHWM) by then.
    rss_peak_bytes: u64,
    /// The peak above the idle figure.
    peak_above_idle_bytes: u64,
    /// Resident memory 5 s after the streams disconnected.
    rss_after_leaving_bytes: u64,
    seconds: f64,
}

/// The highest resident memory of a process so far, in bytes.
fn peak_rss(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmHWM")?;
    Ok(kb * 1024)
}

async fn run_stalled(
    url: &str,
    clients: usize,
    events: usize,
    input_kb: usize,
    pid: u32,
    timeout: Duration,
) -> anyhow::Result<StalledReport> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = loopback(url)?;
    tokio::time::sleep(SETTLE).await;
    let idle = rss(pid)?;
    // Each stream sends its request, reads the response head (to know it was accepted),
    // and then reads nothing more.
    let mut streams = Vec::with_capacity(clients);
    let mut accepted = 0;
    for _ in 0..clients {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET /v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut head = [0u8; 12];
        if tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
            .await
            .is_ok_and(|r| r.is_ok())
            && head.starts_with(b"HTTP/1.1 200")
        {
            accepted += 1;
        }
        streams.push(s);
    }
    tokio::time::sleep(SETTLE).await;
    let with_clients = rss(pid)?;
    let run_id = uuid::Uuid::now_v7().simple().to_string();
    let command = "x".repeat(input_kb * 1024);
    let t = Instant::now();
    let interactions = events.div_ceil(2);
    let done = tokio::time::timeout(timeout, async {
        let mut conn = Conn::open(addr).await?;
        for n in 0..interactions {
            let id = format!("st-{run_id}-{n}");
            let body = json!({"id": id, "tool_name": "Bash", "agent": "loadgen",
                "input": {"command": command}})
            .to_string();
            let (s, b) = conn.call("POST", "/v1/interactions", Some(body)).await?;
            if s != 201 {
                bail!("create failed: {s} {}", String::from_utf8_lossy(&b));
            }
            let answer = json!({"decision": "deny", "message": "load test", "by": "loadgen"});
            let (s, b) = conn
                .call(
                    "POST",
                    &format!("/v1/interactions/{id}/respond"),
                    Some(answer.to_string()),
                )
                .await?;
            if s != 200 {
                bail!("answer failed: {s} {}", String::from_utf8_lossy(&b));
            }
        }
        anyhow::Ok(())
    })
    .await;
    match done {
        Ok(r) => r?,
        Err(_) => bail!(
            "the events were not all caused within {} s",
            timeout.as_secs()
        ),
    }
    let seconds = t.elapsed().as_secs_f64();
    let (after_events, _) = stable_rss(pid, Duration::from_secs(10)).await?;
    let peak = peak_rss(pid)?;
    drop(streams);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after_leaving = rss(pid)?;
    Ok(StalledReport {
        clients,
        clients_accepted: accepted,
        events: interactions * 2,
        input_bytes: command.len(),
        rss_idle_bytes: idle,
        rss_with_clients_bytes: with_clients,
        rss_after_events_bytes: after_events,
        rss_peak_bytes: peak,
        peak_above_idle_bytes: peak.saturating_sub(idle),
        rss_after_leaving_bytes: after_leaving,
        seconds,
    })
}

// ---------------------------------------------------------------- pending mode

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    Ok(kb * 1024)
}

/// How long a server is left alone before its resident memory is read (after start-up and
/// after a burst of creations).
const SETTLE: Duration = Duration::from_millis(500);

/// Resident memory once it has stopped moving: two reads 1 s apart within 1% of each other,
/// or the last read when `bound` has passed first (then `false`).
async fn stable_rss(pid: u32, bound: Duration) -> anyhow::Result<(u64, bool)> {
    let start = Instant::now();
    let mut last = rss(pid)?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = rss(pid)?;
        if now.abs_diff(last) * 100 <= last {
            return Ok((now, true));
        }
        last = now;
        if start.elapsed() >= bound {
            return Ok((now, false));
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct PendingReport {
    count: usize,
    waiters: usize,
    rss_before_bytes: u64,
    rss_after_create_bytes: u64,
    rss_with_waiters_bytes: u64,
    /// Whether that memory had stopped moving when it was read (see [`stable_rss`]).
    rss_with_waiters_stable: bool,
    bytes_per_pending: f64,
    /// The memory the waiters added, divided by `waiters_held`.
    bytes_per_waiter: f64,
    create_seconds: f64,
    /// Waiters whose request was written to their connection.
    waiters_connected: usize,
    /// Of those, the ones still waiting (no response yet) when the memory was read.
    waiters_held: usize,
    waiter_errors: u64,
    /// The interactions' ids are this followed by 0, 1, … `count - 1`.
    id_prefix: String,
}

async fn run_pending(
    url: &str,
    count: usize,
    waiters: usize,
    pid: u32,
    create_timeout: Duration,
) -> anyhow::Result<PendingReport> {
    let addr = loopback(url)?;
    tokio::time::sleep(SETTLE).await;
    let before = rss(pid)?;
    let run_id = uuid::Uuid::now_v7().simple().to_string();
    let t = Instant::now();
    let per = count.div_ceil(64);
    let created = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..64 {
        let (run_id, created) = (run_id.clone(), created.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            for n in (c * per)..((c + 1) * per).min(count) {
                let body = json!({"id": format!("pd-{run_id}-{n}"), "tool_name": "Bash", "agent": "loadgen",
                    "session": format!("session-{}", n % 100), "cwd": "/home/dev/project",
                    "timeout_secs": 3600,
                    "input": {"command": format!("cargo test --package crate-{n} -- --nocapture"), "description": "Run the tests of one crate"}})
                    .to_string();
                let (s, b) = conn.call("POST", "/v1/interactions", Some(body)).await?;
                if s != 201 {
                    bail!("create failed: {s} {}", String::from_utf8_lossy(&b));
                }
                created.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let outcome = tokio::time::timeout(create_timeout, async {
        for t in &mut tasks {
            t.await??;
        }
        anyhow::Ok(())
    })
    .await;
    for t in &tasks {
        t.abort();
    }
    match outcome {
        Ok(r) => r?,
        Err(_) => bail!(
            "created only {} of {count} interactions in {} s",
            created.load(Ordering::Relaxed),
            create_timeout.as_secs()
        ),
    }
    let create_seconds = t.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let after_create = rss(pid)?;

    // W long-poll waiters, one connection each, on the first W interactions.
    let attempted = waiters.min(count) as u64;
    let sent = Arc::new(AtomicU64::new(0));
    let unsent = Arc::new(AtomicU64::new(0));
    let returned = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut held = Vec::new();
    for n in 0..attempted {
        let (sent, unsent, returned, errors, run_id) = (
            sent.clone(),
            unsent.clone(),
            returned.clone(),
            errors.clone(),
            run_id.clone(),
        );
        held.push(tokio::spawn(async move {
            let path = format!("/v1/interactions/pd-{run_id}-{n}/wait?timeout_secs=60");
            let mut w = match Waiter::open(addr).await {
                Ok(w) => w,
                Err(_) => {
                    unsent.fetch_add(1, Ordering::Relaxed);
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            if w.send_get(&path).await.is_err() {
                unsent.fetch_add(1, Ordering::Relaxed);
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
            sent.fetch_add(1, Ordering::Relaxed);
            let r = w.response().await;
            returned.fetch_add(1, Ordering::Relaxed);
            if !matches!(r, Ok((202, _))) {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }));
        if n % 500 == 499 {
            tokio::task::yield_now().await;
        }
    }
    // Every request written (or failed), then the server's memory steady. The server reports
    // no count of parked waits, so steady memory stands for "all parked". Both bounds together
    // stay well inside the waits' 60 s, which would end them and free their memory.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sent.load(Ordering::Relaxed) + unsent.load(Ordering::Relaxed) < attempted
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (with_waiters, stable) = stable_rss(pid, Duration::from_secs(20)).await?;
    let waiters_connected = sent.load(Ordering::Relaxed);
    let waiters_held = waiters_connected.saturating_sub(returned.load(Ordering::Relaxed));
    if !stable {
        eprintln!("warning: the server's memory was still moving when read with waiters");
    }
    // The polls end after 60 s with 202 each; wait for them to count errors.
    for h in held {
        let _ = h.await;
    }
    Ok(PendingReport {
        count,
        waiters,
        rss_before_bytes: before,
        rss_after_create_bytes: after_create,
        rss_with_waiters_bytes: with_waiters,
        rss_with_waiters_stable: stable,
        bytes_per_pending: (after_create.saturating_sub(before)) as f64 / count as f64,
        bytes_per_waiter: (with_waiters.saturating_sub(after_create)) as f64
            / waiters_held.max(1) as f64,
        create_seconds,
        waiters_connected: waiters_connected as usize,
        waiters_held: waiters_held as usize,
        waiter_errors: errors.load(Ordering::Relaxed),
        id_prefix: format!("pd-{run_id}-"),
    })
}

// ---------------------------------------------------------------- flood mode

/// How long a probe or a flood connection may take to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a /livez probe may take, connection included, before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before a closed flood connection is opened again (with `--reconnect`).
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug, serde::Serialize)]
struct FloodReport {
    slow: usize,
    idle: usize,
    trickle_secs: u64,
    reconnect: bool,
    seconds: f64,
    /// Flood connections opened (more than `slow + idle` with `--reconnect`).
    opened: u64,
    /// Connection attempts that failed or took over 5 s.
    connect_failed: u64,
    /// Flood connections the server closed while they were held.
    closed_by_server: u64,
    /// Of those, the ones closed at once (under 50 ms).
    closed_at_once: u64,
    /// Of those, the ones that got a response (an unfinished head can only get an error).
    answered: u64,
    /// Statuses of those responses.
    answered_statuses: std::collections::BTreeMap<u16, u64>,
    /// Time from opening to the server's close, milliseconds.
    closed_after_ms: Option<Percentiles>,
    /// Flood connections still open when the flood ended.
    open_at_end: u64,
    probes: u64,
    probes_ok: u64,
    /// Failed probes by how: a status, `timeout`, `closed` (no response), `error`.
    probe_failures: std::collections::BTreeMap<String, u64>,
    /// Latency of the successful probes, microseconds.
    probe_us: Option<Percentiles>,
    rss_before_bytes: Option<u64>,
    rss_peak_bytes: Option<u64>,
    /// Resident memory 2 s after the flood let go.
    rss_after_bytes: Option<u64>,
}

/// What became of one flood connection.
#[derive(Default)]
struct Held {
    opened: bool,
    closed_after: Option<Duration>,
    status: Option<u16>,
}

/// Opens one flood connection and holds it until `until` or until the server closes it:
/// slow ones send the start of a request head and then one byte every `trickle`, idle ones
/// send nothing.
async fn hold(addr: SocketAddr, slow: bool, trickle: Duration, until: Instant) -> Held {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut held = Held::default();
    let Ok(Ok(mut stream)) =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await
    else {
        return held;
    };
    held.opened = true;
    let opened = Instant::now();
    if slow
        && stream
            .write_all(format!("GET /livez HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes())
            .await
            .is_err()
    {
        held.closed_after = Some(opened.elapsed());
        return held;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let mut next_byte = tokio::time::Instant::now() + trickle;
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(n) if n > 0 => {
                    got.extend_from_slice(&buf[..n]);
                    continue;
                }
                _ => break,
            },
            () = tokio::time::sleep_until(next_byte), if slow => {
                next_byte += trickle;
                if stream.write_all(b"a").await.is_err() {
                    break;
                }
            }
            () = tokio::time::sleep_until(until.into()) => return held,
        }
    }
    held.closed_after = Some(opened.elapsed());
    held.status = std::str::from_utf8(&got)
        .ok()
        .and_then(|t| t.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok());
    held
}

/// One `GET /livez` on a new connection: its latency, or how it failed.
async fn probe_livez(addr: SocketAddr) -> Result<Duration, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let start = Instant::now();
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|_| "error".to_string())?;
        stream
            .write_all(
                format!("GET /livez HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .map_err(|_| "error".to_string())?;
        let mut got = Vec::new();
        stream
            .read_to_end(&mut got)
            .await
            .map_err(|_| "error".to_string())?;
        let text = String::from_utf8_lossy(&got);
        match text.split_whitespace().nth(1) {
            Some("200") => Ok(start.elapsed()),
            Some(status) => Err(status.to_string()),
            None => Err("closed".to_string()),
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err("timeout".to_string()))
}

#[allow(clippy::too_many_arguments)]
async fn run_flood(
    url: &str,
    slow: usize,
    trickle: Duration,
    idle: usize,
    duration: Duration,
    reconnect: bool,
    probe_every: Duration,
    pid: Option<u32>,
) -> anyhow::Result<FloodReport> {
    let addr = loopback(url)?;
    let rss_before = pid.map(rss).transpose()?;
    let start = Instant::now();
    let until = start + duration;
    let holders: Vec<_> = (0..slow + idle)
        .map(|i| {
            let is_slow = i < slow;
            tokio::spawn(async move {
                let mut all = Vec::new();
                loop {
                    let held = hold(addr, is_slow, trickle, until).await;
                    let closed = held.closed_after.is_some() || !held.opened;
                    all.push(held);
                    if !(reconnect && closed) || Instant::now() + RECONNECT_PAUSE >= until {
                        return all;
                    }
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            })
        })
        .collect();

    let mut probes = 0u64;
    let mut probe_us = hist();
    let mut probe_failures = std::collections::BTreeMap::new();
    let mut rss_peak = rss_before;
    while Instant::now() < until {
        let next = Instant::now() + probe_every;
        probes += 1;
        match probe_livez(addr).await {
            Ok(took) => probe_us.saturating_record(took.as_micros() as u64),
            Err(how) => *probe_failures.entry(how).or_insert(0u64) += 1,
        }
        if let Some(pid) = pid {
            let now = rss(pid)?;
            rss_peak = rss_peak.max(Some(now));
        }
        tokio::time::sleep_until(next.into()).await;
    }

    let mut report = FloodReport {
        slow,
        idle,
        trickle_secs: trickle.as_secs(),
        reconnect,
        seconds: start.elapsed().as_secs_f64(),
        opened: 0,
        connect_failed: 0,
        closed_by_server: 0,
        closed_at_once: 0,
        answered: 0,
        answered_statuses: Default::default(),
        closed_after_ms: None,
        open_at_end: 0,
        probes,
        probes_ok: probe_us.len(),
        probe_failures,
        probe_us: (!probe_us.is_empty()).then(|| percentiles(&probe_us)),
        rss_before_bytes: rss_before,
        rss_peak_bytes: rss_peak,
        rss_after_bytes: None,
    };
    let mut closed_ms = hist();
    for h in holders {
        for held in h.await? {
            if !held.opened {
                report.connect_failed += 1;
                continue;
            }
            report.opened += 1;
            match held.closed_after {
                None => report.open_at_end += 1,
                Some(after) => {
                    report.closed_by_server += 1;
                    if after < Duration::from_millis(50) {
                        report.closed_at_once += 1;
                    }
                    closed_ms.saturating_record((after.as_millis() as u64).max(1));
                }
            }
            if let Some(status) = held.status {
                report.answered += 1;
                *report.answered_statuses.entry(status).or_insert(0) += 1;
            }
        }
    }
    report.closed_after_ms = (!closed_ms.is_empty()).then(|| percentiles(&closed_ms));
    // The flood's connections are closed by now (their tasks returned and dropped them).
    if let Some(pid) = pid {
        tokio::time::sleep(Duration::from_secs(2)).await;
        report.rss_after_bytes = Some(rss(pid)?);
    }
    Ok(report)
}

// ---------------------------------------------------------------- suite

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts imrelay and returns it with the time until /healthz answered.
async fn start_imrelay(
    bin: &Path,
    backend: &str,
    db: &Path,
    synchronous: &str,
) -> anyhow::Result<(Server, Duration)> {
    let store = [
        ("IMRELAY__STORE__BACKEND", backend.to_string()),
        ("IMRELAY__STORE__PATH", db.display().to_string()),
        ("IMRELAY__STORE__SYNCHRONOUS", synchronous.to_string()),
    ];
    let (server, spawned, port) = spawn_imrelay(bin, &store)?;
    let ready = wait_ready(port, spawned).await?;
    Ok((server, ready))
}

/// Starts imrelay with the store settings `store` (name, value), and returns it with when it
/// was spawned and its port, without waiting for it.
fn spawn_imrelay(bin: &Path, store: &[(&str, String)]) -> anyhow::Result<(Server, Instant, u16)> {
    let port = free_port()?;
    let t = Instant::now();
    // Only the settings below: an inherited IMRELAY_CONFIG, IMRELAY__TELEGRAM__*,
    // IMRELAY__AUTH__* and the like could start channels that reach the internet or change
    // the figures. No RUST_LOG either: the default level (info: a line per creation and per
    // resolution), written nowhere, so the logging cost stays in the figures.
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .env_clear()
        .env("IMRELAY__SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("IMRELAY__INTERACTIONS__MAX_TIMEOUT_SECS", "7200")
        // The 10,000 long polls of `pending` come from one client (this machine, one share):
        // room for all of them, as the run's `ulimit -n 20000` has.
        .env("IMRELAY__SERVER__MAX_CONNECTIONS", "12000")
        .env("IMRELAY__SERVER__MAX_CONNECTIONS_PER_TOKEN", "12000");
    for (name, value) in store {
        cmd.env(name, value);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    Ok((server, t, port))
}

async fn wait_ready(port: u16, since: Instant) -> anyhow::Result<Duration> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    while since.elapsed() < Duration::from_secs(60) {
        if let Ok(mut c) = Conn::open(addr).await
            && let Ok((200, _)) = c.call("GET", "/healthz", None).await
        {
            return Ok(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    bail!("the server did not become ready within 60 s")
}

fn print_cycle(r: &CycleReport, ceiling: Option<f64>, spread: Option<(f64, f64)>) {
    let ratio = ceiling
        .map(|c| format!("{:.0}%", 100.0 * r.cycles_per_sec / c))
        .unwrap_or_else(|| "-".into());
    let wake = r
        .respond_to_wake_us
        .map(|w| format!("{:>6} {:>7} {:>7}", w.p50, w.p99, w.p999))
        .unwrap_or_else(|| format!("{:>6} {:>7} {:>7}", "-", "-", "-"));
    let cpu = match (r.server_cpu_us_per_cycle, r.db_cpu_us_per_cycle) {
        (Some(c), Some(db)) => format!("{c:.1}+{db:.1}"),
        (Some(c), None) => format!("{c:.1}"),
        (None, _) => "-".into(),
    };
    let spread = spread
        .map(|(lo, hi)| format!("{lo:.0}-{hi:.0}"))
        .unwrap_or_default();
    println!(
        "{:<36} {:>9.0} {:>11} {:>6}  {:>6} {:>7} {:>7}   {}  {:>12}  {:>5}",
        r.target,
        r.cycles_per_sec,
        spread,
        ratio,
        r.cycle_us.p50,
        r.cycle_us.p99,
        r.cycle_us.p999,
        wake,
        cpu,
        r.errors
    );
}

/// The share of waits that were parked when their answer came, if the server reports it.
fn print_parked(r: &CycleReport) {
    if let Some(share) = r.waits_woken_share {
        let other = r
            .other_cpu_share
            .map(|o| format!("; other programs used {:.0}% of the CPU", o * 100.0))
            .unwrap_or_default();
        println!(
            "{:<36} waits parked when the answer came: {:.1}%{other}",
            r.target,
            share * 100.0
        );
    }
}

/// Printed under runs without a think time.
const NO_THINK_NOTE: &str = "resp→wake with no think time: the answer may come before the wait \
    is parked, so it is not a wake latency (see \"waits parked\")";

fn print_cycle_header() {
    println!(
        "{:<36} {:>9} {:>11} {:>6}  {:>22}   {:>22}  {:>12}  {:>5}",
        "",
        "cycles/s",
        "(min-max)",
        "ratio",
        "cycle µs p50/p99/p999",
        "resp→wake µs p50/p99/p999",
        "cpu µs/c (+db)",
        "errors"
    );
}

/// The run with the median cycles/s, and the lowest and highest cycles/s seen.
fn median(mut runs: Vec<CycleReport>) -> anyhow::Result<(CycleReport, (f64, f64))> {
    runs.sort_by(|a, b| a.cycles_per_sec.total_cmp(&b.cycles_per_sec));
    let lo = runs.first().context("no runs")?.cycles_per_sec;
    let hi = runs.last().context("no runs")?.cycles_per_sec;
    let mid = runs.len() / 2;
    Ok((runs.swap_remove(mid), (lo, hi)))
}

/// One cycle run against a fresh imrelay.
#[allow(clippy::too_many_arguments)]
async fn imrelay_cycles(
    bin: &Path,
    backend: &str,
    db: &Path,
    sync: &str,
    agents: usize,
    d: Duration,
    max_cycles: u64,
    label: &str,
    think: Duration,
) -> anyhow::Result<CycleReport> {
    // A fresh database: the file and its write-ahead log and shared-memory index.
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
    let (server, _) = start_imrelay(bin, backend, db, sync).await?;
    let targets = Targets::one(&server.url, Some(server.child.id()))?;
    run_cycles(&targets, agents, d, max_cycles, label, think).await
}

#[allow(clippy::too_many_arguments)]
async fn suite(
    bin: &Path,
    agents: usize,
    duration: u64,
    rounds: usize,
    pending: usize,
    waiters: usize,
    max_cycles: u64,
    create_timeout: Duration,
    sync: &str,
) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let d = Duration::from_secs(duration);
    let me = std::env::current_exe()?;

    // Cycles: each target once per round, interleaved, so drift on the machine touches all
    // of them alike; the median round of each is reported.
    let (mut ceilings, mut memories, mut sqlites, mut fulls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds.max(1) {
        eprintln!("round {round} of {rounds}");
        let port = free_port()?;
        let child = Command::new(&me)
            .args(["ceiling", "--listen", &format!("127.0.0.1:{port}")])
            .env_clear()
            .stderr(Stdio::null())
            .spawn()?;
        let ceiling_server = Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_ready(port, Instant::now()).await?;
        let targets = Targets::one(&ceiling_server.url, Some(ceiling_server.child.id()))?;
        let mut c = run_cycles(
            &targets,
            agents,
            d,
            max_cycles,
            "stateless ceiling",
            Duration::ZERO,
        )
        .await?;
        c.respond_to_wake_us = None;
        ceilings.push(c);
        drop(ceiling_server);
        let db = dir.path().join("cycle.db");
        memories.push(
            imrelay_cycles(
                bin,
                "memory",
                &db,
                sync,
                agents,
                d,
                max_cycles,
                "imrelay (memory)",
                Duration::ZERO,
            )
            .await?,
        );
        sqlites.push(
            imrelay_cycles(
                bin,
                "sqlite",
                &db,
                sync,
                agents,
                d,
                max_cycles,
                &format!("imrelay (sqlite, {sync})"),
                Duration::ZERO,
            )
            .await?,
        );
        if sync != "full" {
            fulls.push(
                imrelay_cycles(
                    bin,
                    "sqlite",
                    &db,
                    "full",
                    agents,
                    d,
                    max_cycles,
                    "imrelay (sqlite, full)",
                    Duration::ZERO,
                )
                .await?,
            );
        }
    }
    // The table shows the median round; the errors of every round are reported too.
    let errors_per_round = |runs: &[CycleReport]| runs.iter().map(|r| r.errors).collect::<Vec<_>>();
    let errors = json!({"ceiling": errors_per_round(&ceilings), "memory": errors_per_round(&memories),
        "sqlite": errors_per_round(&sqlites), "sqlite_full": errors_per_round(&fulls)});
    let (ceiling, ceiling_spread) = median(ceilings)?;
    let (memory, memory_spread) = median(memories)?;
    let (sqlite, sqlite_spread) = median(sqlites)?;
    let full = if fulls.is_empty() {
        None
    } else {
        Some(median(fulls)?)
    };

    println!();
    print_cycle_header();
    print_cycle(&ceiling, None, Some(ceiling_spread));
    print_cycle(&memory, Some(ceiling.cycles_per_sec), Some(memory_spread));
    print_cycle(&sqlite, Some(ceiling.cycles_per_sec), Some(sqlite_spread));
    if let Some((full, spread)) = &full {
        print_cycle(full, Some(ceiling.cycles_per_sec), Some(*spread));
    }
    println!("errors in each round: {errors}");
    println!("{NO_THINK_NOTE}");

    // Wake latency without queueing: a few agents that answer 2 ms after their wait left,
    // so every answer finds its wait parked.
    let think = Duration::from_millis(2);
    let db = dir.path().join("latency.db");
    let latency_memory = imrelay_cycles(
        bin,
        "memory",
        &db,
        sync,
        4,
        d,
        max_cycles,
        "memory, 4 agents, 2 ms",
        think,
    )
    .await?;
    let latency_sqlite = imrelay_cycles(
        bin,
        "sqlite",
        &db,
        sync,
        4,
        d,
        max_cycles,
        &format!("sqlite {sync}, 4 agents, 2 ms"),
        think,
    )
    .await?;
    println!();
    println!("wake latency at light load (answers 2 ms after the wait left):");
    print_cycle_header();
    print_cycle(&latency_memory, None, None);
    print_cycle(&latency_sqlite, None, None);
    for r in [&memory, &sqlite, &latency_memory, &latency_sqlite] {
        print_parked(r);
    }

    // Idle memory and start-up, on the default (SQLite) store.
    let empty = dir.path().join("empty.db");
    let (idle, ready_sqlite) = start_imrelay(bin, "sqlite", &empty, sync).await?;
    tokio::time::sleep(SETTLE).await;
    let idle_rss = rss(idle.child.id())?;
    drop(idle);
    let (idle_mem, ready_memory) =
        start_imrelay(bin, "memory", &dir.path().join("unused.db"), sync).await?;
    tokio::time::sleep(SETTLE).await;
    let idle_rss_memory = rss(idle_mem.child.id())?;
    drop(idle_mem);

    // Pending interactions (and long-poll waiters) on the default store, then start-up with
    // them in it; the memory store for comparison.
    let pdb = dir.path().join("pending.db");
    let (sq, _) = start_imrelay(bin, "sqlite", &pdb, sync).await?;
    let pend_sqlite = run_pending(&sq.url, pending, waiters, sq.child.id(), create_timeout).await?;
    drop(sq);
    let (sq, ready_loaded) = start_imrelay(bin, "sqlite", &pdb, sync).await?;
    let loaded_rss = rss(sq.child.id())?;
    drop(sq);
    let (mem, _) = start_imrelay(bin, "memory", &dir.path().join("unused2.db"), sync).await?;
    let pend_mem = run_pending(&mem.url, pending, 0, mem.child.id(), create_timeout).await?;
    drop(mem);

    println!();
    println!(
        "idle RSS:                  sqlite {:.1} MB, memory {:.1} MB",
        idle_rss as f64 / 1e6,
        idle_rss_memory as f64 / 1e6
    );
    println!(
        "ready, empty store:        sqlite {:.0} ms, memory {:.0} ms",
        ready_sqlite.as_secs_f64() * 1e3,
        ready_memory.as_secs_f64() * 1e3
    );
    println!(
        "ready, {pending} pending in SQLite: {:.0} ms (RSS then {:.1} MB)",
        ready_loaded.as_secs_f64() * 1e3,
        loaded_rss as f64 / 1e6
    );
    for (label, p) in [("sqlite", &pend_sqlite), ("memory", &pend_mem)] {
        println!(
            "{label:<7} {} pending: +{:.1} MB ({:.0} B each), created in {:.1} s",
            p.count,
            (p.rss_after_create_bytes.saturating_sub(p.rss_before_bytes)) as f64 / 1e6,
            p.bytes_per_pending,
            p.create_seconds,
        );
    }
    println!(
        "sqlite  {} long-poll waiters: +{:.1} MB ({:.0} B each), {} sent, {} held, {} errors{}",
        pend_sqlite.waiters,
        (pend_sqlite
            .rss_with_waiters_bytes
            .saturating_sub(pend_sqlite.rss_after_create_bytes)) as f64
            / 1e6,
        pend_sqlite.bytes_per_waiter,
        pend_sqlite.waiters_connected,
        pend_sqlite.waiters_held,
        pend_sqlite.waiter_errors,
        if pend_sqlite.rss_with_waiters_stable {
            ""
        } else {
            " (memory still moving when read)"
        }
    );
    Ok(json!({
        "cycle": {"ceiling": ceiling, "memory": memory, "sqlite": sqlite,
                  "sqlite_full": full.as_ref().map(|(f, _)| f)},
        "errors_per_round": errors,
        "spread": {"ceiling": ceiling_spread, "memory": memory_spread, "sqlite": sqlite_spread,
                   "sqlite_full": full.as_ref().map(|(_, s)| s)},
        "ratio": {"memory": memory.cycles_per_sec / ceiling.cycles_per_sec,
                  "sqlite": sqlite.cycles_per_sec / ceiling.cycles_per_sec,
                  "sqlite_full": full.as_ref().map(|(f, _)| f.cycles_per_sec / ceiling.cycles_per_sec)},
        "latency": {"memory": latency_memory, "sqlite": latency_sqlite},
        "pending": {"sqlite": pend_sqlite, "memory": pend_mem},
        "idle_rss_bytes": {"sqlite": idle_rss, "memory": idle_rss_memory},
        "ready_ms": {"sqlite_empty": ready_sqlite.as_secs_f64() * 1e3,
                     "memory_empty": ready_memory.as_secs_f64() * 1e3,
                     "sqlite_loaded": ready_loaded.as_secs_f64() * 1e3},
        "loaded_rss_bytes": loaded_rss,
        "synchronous": sync,
        "rounds": rounds,
        "agents": agents,
        "seconds_per_run": duration,
    }))
}

// ---------------------------------------------------------------- replicas on PostgreSQL

/// Checks that a PostgreSQL URL names this machine only (a loopback address, `localhost` or
/// a Unix socket).
fn local_postgres(url: &str) -> anyhow::Result<()> {
    let config: tokio_postgres::Config = url.parse().context("not a PostgreSQL connection URL")?;
    if config.get_hosts().is_empty() {
        bail!("the PostgreSQL URL names no host");
    }
    for host in config.get_hosts() {
        match host {
            tokio_postgres::config::Host::Tcp(h) => {
                let local = h == "localhost"
                    || h.parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                if !local {
                    bail!("loadgen only uses a PostgreSQL server on this machine, not {h}");
                }
            }
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(_) => {}
        }
    }
    Ok(())
}

/// Runs `sql` on the PostgreSQL server at `url` (on this machine, without TLS).
async fn pg_execute(url: &str, sql: &str) -> anyhow::Result<()> {
    local_postgres(url)?;
    let connect = tokio_postgres::connect(url, tokio_postgres::NoTls);
    let (client, conn) = tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .context("PostgreSQL did not answer within 10 s")??;
    let conn = tokio::spawn(conn);
    client.batch_execute(sql).await?;
    drop(client);
    let _ = conn.await;
    Ok(())
}

/// A new schema for one run (imrelay creates it; [`drop_schema`] removes it).
fn scratch_schema() -> String {
    format!("loadgen_{}", uuid::Uuid::now_v7().simple())
}

async fn drop_schema(url: &str, schema: &str) -> anyhow::Result<()> {
    pg_execute(url, &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await
}

/// The store settings of a replica on `schema` of the database at `url`.
fn replica_store(url: &str, schema: &str) -> [(&'static str, String); 3] {
    [
        ("IMRELAY__STORE__BACKEND", "postgres".into()),
        ("IMRELAY__STORE__URL", url.into()),
        ("IMRELAY__STORE__SCHEMA", schema.into()),
    ]
}

/// Starts a replica on `schema` and returns it with the time until /healthz answered.
async fn start_replica(bin: &Path, url: &str, schema: &str) -> anyhow::Result<(Server, Duration)> {
    let (server, spawned, port) = spawn_imrelay(bin, &replica_store(url, schema))?;
    let ready = wait_ready(port, spawned).await?;
    Ok((server, ready))
}

/// What a run's agents talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// One imrelay on SQLite.
    Sqlite,
    /// One replica on PostgreSQL.
    One,
    /// Two replicas: every agent creates and waits on the first and answers on the second.
    Cross,
    /// Two replicas: half the agents on each, each answering where it waits.
    Split,
}

impl Setup {
    fn key(self) -> &'static str {
        match self {
            Setup::Sqlite => "sqlite",
            Setup::One => "postgres_one",
            Setup::Cross => "postgres_cross",
            Setup::Split => "postgres_split",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Setup::Sqlite => "sqlite, 1 replica",
            Setup::One => "postgres, 1 replica",
            Setup::Cross => "postgres, wait on A, answer on B",
            Setup::Split => "postgres, 2 replicas, agents split",
        }
    }
}

/// One cycle run on fresh servers: SQLite from a fresh file, PostgreSQL replicas on a new
/// schema, dropped after the run.
#[allow(clippy::too_many_arguments)]
async fn setup_cycles(
    bin: &Path,
    pg_url: &str,
    dir: &Path,
    sync: &str,
    setup: Setup,
    agents: usize,
    d: Duration,
    max_cycles: u64,
    think: Duration,
) -> anyhow::Result<CycleReport> {
    let label = format!("{}, {agents} agents", setup.label());
    if setup == Setup::Sqlite {
        let db = dir.join("replicas.db");
        return imrelay_cycles(
            bin, "sqlite", &db, sync, agents, d, max_cycles, &label, think,
        )
        .await;
    }
    let schema = scratch_schema();
    let run = async {
        let (a, _) = start_replica(bin, pg_url, &schema).await?;
        let b = match setup {
            Setup::Cross | Setup::Split => Some(start_replica(bin, pg_url, &schema).await?.0),
            Setup::Sqlite | Setup::One => None,
        };
        let mut targets = Targets {
            wait: vec![loopback(&a.url)?],
            respond: Vec::new(),
            pids: vec![a.child.id()],
            db_cpu: true,
        };
        if let Some(b) = &b {
            targets.pids.push(b.child.id());
            match setup {
                Setup::Cross => targets.respond.push(loopback(&b.url)?),
                _ => targets.wait.push(loopback(&b.url)?),
            }
        }
        let r = run_cycles(&targets, agents, d, max_cycles, &label, think).await;
        drop(b);
        drop(a);
        r
    }
    .await;
    let dropped = drop_schema(pg_url, &schema).await;
    let r = run?;
    dropped?;
    Ok(r)
}

/// Start-up with many pending interactions.
#[derive(Debug, serde::Serialize)]
struct StartupReport {
    store: String,
    /// Creating the pending interactions (on a first process, stopped afterwards).
    pending: Option<PendingReport>,
    /// The restarted process: start to its first `200` from /healthz.
    ready_ms: f64,
    /// Start to the answer of a wait sent once ready (the answer sent right behind it).
    first_answer_ms: f64,
    rss_at_ready_bytes: u64,
    /// Resident memory once it stopped moving (see [`stable_rss`]).
    rss_settled_bytes: u64,
    rss_settled_stable: bool,
    /// CPU time the process used from its start until its memory settled.
    cpu_ms_until_settled: f64,
    /// A second replica started while the first one runs (PostgreSQL), its wait answered on
    /// the first.
    second_replica: Option<Box<StartupReport>>,
}

/// Sends a wait for `id` to `wait_at`, then the answer to `answer_at`; returns when the wait
/// was answered (200).
async fn answered_wait(
    wait_at: SocketAddr,
    answer_at: SocketAddr,
    id: &str,
) -> anyhow::Result<Instant> {
    let mut w = Waiter::open(wait_at).await?;
    w.send_get(&format!("/v1/interactions/{id}/wait?timeout_secs=30"))
        .await?;
    let mut c = Conn::open(answer_at).await?;
    let (s, b) = c
        .call(
            "POST",
            &format!("/v1/interactions/{id}/respond"),
            Some(r#"{"decision":"allow","by":"loadgen"}"#.to_string()),
        )
        .await?;
    if s != 200 {
        bail!("the answer failed: {s} {}", String::from_utf8_lossy(&b));
    }
    let (ws, t) = tokio::time::timeout(Duration::from_secs(35), w.response())
        .await
        .context("the wait was not answered within 35 s")??;
    if ws != 200 {
        bail!("the wait was answered {ws}");
    }
    Ok(t)
}

/// Spawns imrelay with `store` and measures its start: ready, the first answered wait (on
/// it, the answer on `answer_at` or on it), its memory and CPU until its memory settles.
async fn measure_start(
    bin: &Path,
    store: &[(&str, String)],
    id: &str,
    answer_at: Option<SocketAddr>,
) -> anyhow::Result<(Server, StartupReport)> {
    let (server, spawned, port) = spawn_imrelay(bin, store)?;
    let pid = server.child.id();
    let ready = wait_ready(port, spawned).await?;
    let rss_at_ready = rss(pid)?;
    let addr = loopback(&server.url)?;
    let answered = answered_wait(addr, answer_at.unwrap_or(addr), id).await?;
    let (settled, stable) = stable_rss(pid, Duration::from_secs(20)).await?;
    let cpu = cpu_us(pid)?;
    let report = StartupReport {
        store: String::new(),
        pending: None,
        ready_ms: ready.as_secs_f64() * 1e3,
        first_answer_ms: (answered - spawned).as_secs_f64() * 1e3,
        rss_at_ready_bytes: rss_at_ready,
        rss_settled_bytes: settled,
        rss_settled_stable: stable,
        cpu_ms_until_settled: cpu / 1e3,
        second_replica: None,
    };
    Ok((server, report))
}

/// Creates `pending` interactions through one process, stops it, and measures a new one's
/// start (and, on PostgreSQL, a second replica's start next to it).
async fn startup(
    bin: &Path,
    store: &[(&str, String)],
    second: bool,
    pending: usize,
    create_timeout: Duration,
) -> anyhow::Result<StartupReport> {
    let (first, spawned, port) = spawn_imrelay(bin, store)?;
    wait_ready(port, spawned).await?;
    let p = run_pending(&first.url, pending, 0, first.child.id(), create_timeout).await?;
    drop(first);
    let (a, mut report) = measure_start(bin, store, &format!("{}0", p.id_prefix), None).await?;
    if second {
        let (b, r) = measure_start(
            bin,
            store,
            &format!("{}1", p.id_prefix),
            Some(loopback(&a.url)?),
        )
        .await?;
        drop(b);
        report.second_replica = Some(Box::new(r));
    }
    drop(a);
    report.pending = Some(p);
    Ok(report)
}

fn print_startup(r: &StartupReport, who: &str) {
    println!(
        "{:<36} ready {:>6.0} ms, first answered wait {:>6.0} ms, RSS at ready {:>6.1} MB, settled {:>6.1} MB{}, CPU until then {:>6.0} ms",
        format!("{} {who}", r.store),
        r.ready_ms,
        r.first_answer_ms,
        r.rss_at_ready_bytes as f64 / 1e6,
        r.rss_settled_bytes as f64 / 1e6,
        if r.rss_settled_stable {
            ""
        } else {
            " (still moving)"
        },
        r.cpu_ms_until_settled,
    );
}

/// Several replicas on one PostgreSQL database, next to one SQLite server: wake latency at
/// light load (`wake`), cycles per second (`cycles`), start-up with pending interactions
/// (`startup`).
#[allow(clippy::too_many_arguments)]
async fn replicas(
    bin: &Path,
    pg_url: &str,
    steps: &[String],
    agents: usize,
    light_agents: usize,
    think: Duration,
    duration: u64,
    rounds: usize,
    pending: usize,
    max_cycles: u64,
    create_timeout: Duration,
    sync: &str,
) -> anyhow::Result<Value> {
    local_postgres(pg_url)?;
    for step in steps {
        if !["wake", "cycles", "startup", "startup-sqlite"].contains(&step.as_str()) {
            bail!("unknown step {step:?}: use wake, cycles, startup, startup-sqlite");
        }
    }
    let dir = tempfile::tempdir()?;
    let d = Duration::from_secs(duration);
    let mut out = serde_json::Map::new();
    let plans = [
        (
            "wake",
            light_agents,
            think,
            &[Setup::Sqlite, Setup::One, Setup::Cross][..],
        ),
        (
            "cycles",
            agents,
            Duration::ZERO,
            &[Setup::Sqlite, Setup::One, Setup::Cross, Setup::Split][..],
        ),
    ];
    for (step, n, think, setups) in plans {
        if !steps.iter().any(|s| s == step) {
            continue;
        }
        // Each setup once per round, interleaved; the median round of each is reported.
        let mut runs: Vec<Vec<CycleReport>> = setups.iter().map(|_| Vec::new()).collect();
        for round in 1..=rounds.max(1) {
            eprintln!("{step}: round {round} of {rounds}");
            for (setup, runs) in setups.iter().zip(&mut runs) {
                // Another program's burst would be measured as ours: let it pass first.
                let busy = wait_quiet(Duration::from_secs(30)).await;
                if busy >= 0.25 {
                    eprintln!(
                        "the machine is busy ({:.0}% of its CPU) before {}; measuring anyway",
                        busy * 100.0,
                        setup.label()
                    );
                }
                let r = setup_cycles(
                    bin,
                    pg_url,
                    dir.path(),
                    sync,
                    *setup,
                    n,
                    d,
                    max_cycles,
                    think,
                )
                .await?;
                runs.push(r);
            }
        }
        println!();
        if think.is_zero() {
            println!("cycles, {n} agents:");
        } else {
            println!(
                "wake latency, {n} agents answering {} µs after the wait left:",
                think.as_micros()
            );
        }
        print_cycle_header();
        let mut results = serde_json::Map::new();
        let mut medians = Vec::new();
        for (setup, runs) in setups.iter().zip(runs) {
            let errors: Vec<u64> = runs.iter().map(|r| r.errors).collect();
            let (m, spread) = median(runs)?;
            print_cycle(&m, None, Some(spread));
            results.insert(
                setup.key().into(),
                json!({"median": &m, "spread": spread, "errors_per_round": errors}),
            );
            medians.push(m);
        }
        for m in &medians {
            print_parked(m);
        }
        if think.is_zero() {
            println!("{NO_THINK_NOTE}");
        }
        out.insert(step.into(), Value::Object(results));
    }
    let mut started = Vec::new();
    if steps.iter().any(|s| s == "startup-sqlite") {
        eprintln!("startup: {pending} pending on SQLite");
        let db = dir.path().join("startup.db");
        let sqlite_store = [
            ("IMRELAY__STORE__BACKEND", "sqlite".to_string()),
            ("IMRELAY__STORE__PATH", db.display().to_string()),
            ("IMRELAY__STORE__SYNCHRONOUS", sync.to_string()),
        ];
        let mut on_sqlite = startup(bin, &sqlite_store, false, pending, create_timeout).await?;
        on_sqlite.store = "sqlite".into();
        started.push(on_sqlite);
    }
    if steps.iter().any(|s| s == "startup") {
        eprintln!("startup: {pending} pending on PostgreSQL");
        let schema = scratch_schema();
        let on_pg = startup(
            bin,
            &replica_store(pg_url, &schema),
            true,
            pending,
            create_timeout,
        )
        .await;
        let dropped = drop_schema(pg_url, &schema).await;
        let mut on_pg = on_pg?;
        dropped?;
        on_pg.store = "postgres".into();
        if let Some(b) = &mut on_pg.second_replica {
            b.store = "postgres".into();
        }
        started.push(on_pg);
    }
    if !started.is_empty() {
        println!();
        println!("start-up with {pending} pending interactions:");
        for r in &started {
            let Some(p) = &r.pending else { continue };
            println!(
                "{:<9} created in {:.1} s ({:.0}/s), +{:.1} MB resident ({:.0} B each)",
                r.store,
                p.create_seconds,
                p.count as f64 / p.create_seconds,
                p.rss_after_create_bytes.saturating_sub(p.rss_before_bytes) as f64 / 1e6,
                p.bytes_per_pending,
            );
        }
        let mut startup = serde_json::Map::new();
        for r in started {
            print_startup(&r, "restarted");
            if let Some(b) = &r.second_replica {
                print_startup(b, "second replica");
            }
            startup.insert(r.store.clone(), json!(r));
        }
        out.insert("startup".into(), Value::Object(startup));
    }
    out.insert("agents".into(), json!(agents));
    out.insert("light_agents".into(), json!(light_agents));
    out.insert("think_us".into(), json!(think.as_micros() as u64));
    out.insert("rounds".into(), json!(rounds));
    out.insert("seconds_per_run".into(), json!(duration));
    out.insert("synchronous".into(), json!(sync));
    Ok(Value::Object(out))
}

fn write_json(path: &Option<PathBuf>, v: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(v)?)?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match cli.command {
            Cmd::Cycle {
                url,
                respond_url,
                agents,
                duration,
                max_cycles,
                pid,
                db_cpu,
                think_us,
                json,
            } => {
                let targets = Targets {
                    wait: url.iter().map(|u| loopback(u)).collect::<Result<_, _>>()?,
                    respond: respond_url
                        .iter()
                        .map(|u| loopback(u))
                        .collect::<Result<_, _>>()?,
                    pids: pid,
                    db_cpu,
                };
                let label = if respond_url.is_empty() {
                    url.join(",")
                } else {
                    format!("{} answered on {}", url.join(","), respond_url.join(","))
                };
                let r = run_cycles(
                    &targets,
                    agents,
                    Duration::from_secs(duration),
                    max_cycles,
                    &label,
                    Duration::from_micros(think_us),
                )
                .await?;
                print_cycle_header();
                print_cycle(&r, None, None);
                print_parked(&r);
                if think_us == 0 {
                    println!("{NO_THINK_NOTE}");
                }
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Pending {
                url,
                count,
                waiters,
                pid,
                create_timeout_secs,
                json,
            } => {
                let r = run_pending(
                    &url,
                    count,
                    waiters,
                    pid,
                    Duration::from_secs(create_timeout_secs),
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Flood {
                url,
                slow,
                trickle_secs,
                idle,
                duration,
                reconnect,
                probe_ms,
                pid,
                json,
            } => {
                let r = run_flood(
                    &url,
                    slow,
                    Duration::from_secs(trickle_secs),
                    idle,
                    Duration::from_secs(duration),
                    reconnect,
                    Duration::from_millis(probe_ms),
                    pid,
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Stalled {
                url,
                clients,
                events,
                input_kb,
                pid,
                timeout_secs,
                json,
            } => {
                let r = run_stalled(
                    &url,
                    clients,
                    events,
                    input_kb,
                    pid,
                    Duration::from_secs(timeout_secs),
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Hooks {
                url,
                agents,
                tools_per_turn,
                message_every,
                duration,
                json,
            } => {
                let r = hooks::run(
                    &url,
                    agents,
                    tools_per_turn,
                    message_every,
                    Duration::from_secs(duration),
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Mcp {
                url,
                sessions,
                streams,
                watch_idle_secs,
                pid,
                timeout_secs,
                json,
            } => {
                let r = mcp::run(
                    &url,
                    sessions,
                    streams,
                    watch_idle_secs.map(Duration::from_secs),
                    pid,
                    Duration::from_secs(timeout_secs),
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
                write_json(&json, &r)
            }
            Cmd::Replicas {
                imrelay,
                postgres_url,
                steps,
                agents,
                light_agents,
                think_us,
                duration,
                rounds,
                pending,
                max_cycles,
                create_timeout_secs,
                synchronous,
                json,
            } => {
                let v = replicas(
                    &imrelay,
                    &postgres_url,
                    &steps,
                    agents,
                    light_agents,
                    Duration::from_micros(think_us),
                    duration,
                    rounds,
                    pending,
                    max_cycles,
                    Duration::from_secs(create_timeout_secs),
                    &synchronous,
                )
                .await?;
                println!("\n{}", serde_json::to_string_pretty(&v)?);
                write_json(&json, &v)
            }
            Cmd::Ceiling { listen } => {
                if !listen.ip().is_loopback() {
                    bail!("the ceiling server listens on loopback only");
                }
                serve_ceiling(listen).await
            }
            Cmd::Suite {
                imrelay,
                agents,
                duration,
                rounds,
                pending,
                waiters,
                max_cycles,
                create_timeout_secs,
                synchronous,
                postgres_url,
                json,
            } => {
                let mut v = suite(
                    &imrelay,
                    agents,
                    duration,
                    rounds,
                    pending,
                    waiters,
                    max_cycles,
                    Duration::from_secs(create_timeout_secs),
                    &synchronous,
                )
                .await?;
                if let Some(pg) = postgres_url {
                    let steps = ["wake", "cycles", "startup", "startup-sqlite"].map(String::from);
                    v["replicas"] = replicas(
                        &imrelay,
                        &pg,
                        &steps,
                        agents,
                        4,
                        Duration::from_millis(2),
                        duration,
                        rounds,
                        pending,
                        max_cycles,
                        Duration::from_secs(create_timeout_secs),
                        &synchronous,
                    )
                    .await?;
                }
                println!("\n{}", serde_json::to_string_pretty(&v)?);
                write_json(&json, &v)
            }
        }
    })
}
