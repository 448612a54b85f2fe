//! The daemon binary under an open-file limit too small for MAX_CONNECTIONS (as under
//! `ulimit -n 400`): the public port's connection cap is cut at start to what the limit leaves,
//! and connections shed at the cap may not pile up beside it, so forged uploads that stall
//! their bodies cannot use up the process's descriptors, and genuine deliveries and the admin
//! port go on being served beside them.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sume_inbox::http::conns::MAX_CLOSING;
use tokio::net::TcpStream;

use crate::port::open_with;
use crate::port_memory::{metric, Binary};
use crate::support::*;

/// The daemon's open-file limit, soft and hard (so it cannot raise it).
const LIMIT: u64 = 400;

/// More than the limit: before, as many descriptors as the process could open.
const UPLOADS: usize = 420;

/// What the limit leaves the public port: 400, less the pool (16), 256 to spare and the admin
/// port's floor (16).
const CAP: usize = 112;

/// An upload without the secret whose headers pass every check made before the body (a fresh
/// timestamp, a well-formed `v1=`), declaring 1,000 bytes and sending one.
async fn forged_upload(addr: SocketAddr) -> TcpStream {
    let head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ncontent-type: application/json\r\n\
         content-length: 1000\r\nx-sume-timestamp: {}\r\nx-sume-signature: v1={}\r\n\r\n{{",
        unix_now(),
        "0".repeat(64)
    );
    open_with(addr, &head).await
}

/// Runs `command` under [`LIMIT`] open files, soft and hard.
fn limit_open_files(command: &mut Command) {
    // SAFETY: setrlimit is async-signal-safe and touches only the struct passed to it.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT as libc::rlim_t,
                rlim_max: LIMIT as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `UPLOADS` forged uploads on `listen`, opened a hundred at a time.
async fn forged_uploads(listen: SocketAddr) -> Vec<TcpStream> {
    let mut uploads = Vec::with_capacity(UPLOADS);
    for batch in 0..UPLOADS.div_ceil(100) {
        let opening = (batch * 100..UPLOADS.min((batch + 1) * 100)).map(|_| forged_upload(listen));
        uploads.extend(futures_util::future::join_all(opening).await);
    }
    uploads
}

/// Watches how many descriptors process `pid` holds, until the answer's flag is set; the
/// thread then answers the most it saw.
fn watch_descriptors(pid: u32) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let watching = stop.clone();
    let watcher = std::thread::spawn(move || {
        let mut most = 0;
        while !watching.load(Ordering::Relaxed) {
            if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
                most = most.max(fds.count());
            }
        }
        most
    });
    (stop, watcher)
}

/// The JSON log line whose message is `message`, from the daemon's log at `path`.
fn logged(path: &PathBuf, message: &str) -> Option<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == message)
}

/// Before, the daemon warned that the limit could not hold MAX_CONNECTIONS and kept it: the
/// uploads took every descriptor, accepts failed with `Too many open files` on both ports, and
/// deliveries waited (here, timed out) until BODY_TIMEOUT expired the uploads.
#[tokio::test(flavor = "multi_thread")]
async fn under_an_open_file_limit_below_max_connections_forged_uploads_keep_no_delivery_out() {
    sume_inbox::process::fd_limit::raise(UPLOADS as u64 + 1024);
    let db = TestDb::new().await;
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("port-fd-limit-{}.log", std::process::id()));
    let env = [
        ("SUME_API_URL", "http://127.0.0.1:9/v1"),
        ("BODY_TIMEOUT", "60s"),
        ("LOG_FORMAT", "json"),
    ];
    let (daemon, listen, admin) = Binary::start_with(&db, &env, |command| {
        command.stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
        limit_open_files(command);
    })
    .await;
    let (stop, watcher) = watch_descriptors(daemon.0.id());
    let uploads = forged_uploads(listen).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    // The cap, the connections shed but not yet closed, and the rest of the process (the admin
    // port, the pool, the runtime): before, connections shed in the burst piled up beside the
    // cap faster than they closed (some 200 more, and all of the limit on a busy machine).
    let most = watcher.join().unwrap();
    assert!(most <= CAP + MAX_CLOSING + 64, "{most} descriptors held");
    // Each delivery on a connection of its own, as Sume's would come.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for i in 0..3 {
        let job = format!("job_beside_forged_uploads_{i}");
        let r = Delivery::completed(&job)
            .send_raw(&http, &format!("http://{listen}/webhooks/sume"))
            .await
            .expect("a genuine delivery is answered");
        assert_eq!(r.status(), 204, "{job}");
        assert!(db.event_job_ids().await.contains(&job), "{job} not stored");
    }
    // The admin port answers too; the public port holds no more than its cap, and made room
    // for the deliveries by shedding uploads.
    let open = metric(admin, "sume_inbox_port_connections_open").await;
    assert!(open <= CAP as f64, "{open} connections open");
    assert!(metric(admin, "sume_inbox_port_bodies_shed_total").await >= 1.0);
    // Said at start, with the values in force.
    let cut = logged(
        &log,
        "the open-file limit leaves the public port fewer connections than MAX_CONNECTIONS",
    )
    .expect("a warning names the public port's cap");
    assert_eq!(cut["connections"], CAP, "{cut}");
    assert_eq!(cut["max_connections"], 10_000, "{cut}");
    assert_eq!(cut["in_flight"], CAP - 1, "{cut}");
    let starved = logged(&log, "accepting a connection failed");
    assert!(starved.is_none(), "{starved:?}");
    drop(uploads);
    drop(daemon);
    let _ = std::fs::remove_file(&log);
}

/// While the start waits (here for the migrations' lock), LISTEN_ADDR already answers: its cap
/// is cut to the open-file limit before, not after, so connections opened meanwhile are shed
/// at it as they are once serving. Before, the start's answers took MAX_CONNECTIONS whole: the
/// connections used up the descriptors (`Too many open files` on accept) until HEADER_TIMEOUT
/// closed them.
#[tokio::test(flavor = "multi_thread")]
async fn under_an_open_file_limit_connections_opened_while_starting_use_up_no_descriptors() {
    sume_inbox::process::fd_limit::raise(UPLOADS as u64 + 1024);
    let db = TestDb::new().await;
    let holder = crate::starting::hold_the_migrations_lock(&db).await;
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("port-fd-limit-start-{}.log", std::process::id()));
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    command
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env("SUME_WEBHOOK_SECRET", SECRET)
        .env("LISTEN_ADDR", listen.to_string())
        .env("ADMIN_ADDR", format!("127.0.0.1:{}", free_port()))
        .env("HEADER_TIMEOUT", "30s")
        .env("LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    limit_open_files(&mut command);
    let daemon = Binary(command.spawn().unwrap());
    wait_for("the start's answers", Duration::from_secs(30), || async {
        matches!(reqwest::get(format!("http://{listen}/readyz")).await, Ok(r) if r.status() == 503)
    })
    .await;
    let (stop, watcher) = watch_descriptors(daemon.0.id());
    // Silent: each holds its connection until HEADER_TIMEOUT, unless shed at the cap.
    let mut silent = Vec::with_capacity(UPLOADS);
    for _ in 0..UPLOADS {
        silent.push(TcpStream::connect(listen).await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let most = watcher.join().unwrap();
    assert!(most <= CAP + MAX_CLOSING + 64, "{most} descriptors held");
    let starved = logged(&log, "accepting a connection failed");
    assert!(starved.is_none(), "{starved:?}");
    crate::starting::release(&holder).await;
    wait_for("serving once migrated", Duration::from_secs(30), || async {
        matches!(reqwest::get(format!("http://{listen}/readyz")).await, Ok(r) if r.status() == 200)
    })
    .await;
    let r = Delivery::completed("job_beside_the_start_s_connections")
        .send_raw(
            &reqwest::Client::new(),
            &format!("http://{listen}/webhooks/sume"),
        )
        .await
        .expect("a genuine delivery is answered");
    assert_eq!(r.status(), 204);
    drop(silent);
    drop(daemon);
    let _ = std::fs::remove_file(&log);
}
