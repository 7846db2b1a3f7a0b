//! A TCP relay that delays every byte by a fixed one-way time: the WAN-like links of the lab
//! (`scripts/wan-lab.sh`, docs/lab.md "WAN-like links"). This kernel has no netem, and a
//! user-space relay needs nothing from the host but a loopback address.
//!
//! ```text
//! cargo build --release --example delay_relay
//! target/release/examples/delay_relay [--ready FILE] TABLE|-
//! ```
//!
//! TABLE has one route a line, `LISTEN_ADDR TARGET_ADDR ONE_WAY_DELAY_MS` (`#` starts a
//! comment). For every accepted connection the relay opens one to the target and copies both
//! directions; each chunk is delivered ONE_WAY_DELAY after it was read. A reader task stamps
//! chunks, a writer task sleeps until stamp + delay, so a delay costs latency, never
//! throughput, and bytes keep their order. The connection to the target is opened 3 one-way
//! delays after the accept (SYN, SYN-ACK, ACK), so the first bytes from the server reach the
//! client 2 round trips after it connected, as over a real link. End of stream (half-close) is
//! passed on after the delay too; an error on either side ends the whole connection, so nothing
//! hangs when one side goes away. `--ready FILE` is written once every listener is bound.
//!
//! It is a lab tool, not part of the driver (never installed with it): no loss, no bandwidth
//! limit, no jitter.
// A command-line tool: it prints its errors and exits with a status (the driver's one-output
// rule, src/console.rs, is for the driver's own binary).
#![allow(clippy::print_stderr, clippy::exit)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

/// The largest one-way delay a table may ask for: 10 s is far beyond any WAN, so a larger
/// figure is a typo (seconds for milliseconds).
const MAX_DELAY_MS: u64 = 10_000;

/// One line of the table: listen here, relay to there, delay each direction by `delay`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    listen: SocketAddr,
    target: SocketAddr,
    delay: Duration,
}

/// Parses the route table. Errors name the line, so a bad table fails before anything listens.
fn parse_table(text: &str) -> Result<Vec<Route>, String> {
    let mut routes = Vec::new();
    let mut seen = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |what: String| format!("line {}: {what} (in '{}')", i + 1, raw.trim());
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [listen, target, delay] = fields[..] else {
            return Err(at(format!(
                "expected 3 fields LISTEN_ADDR TARGET_ADDR ONE_WAY_DELAY_MS, got {}",
                fields.len()
            )));
        };
        let listen: SocketAddr = listen.parse().map_err(|_| at(format!("LISTEN_ADDR '{listen}' is not IP:PORT")))?;
        let target: SocketAddr = target.parse().map_err(|_| at(format!("TARGET_ADDR '{target}' is not IP:PORT")))?;
        let ms: u64 = delay.parse().ok().filter(|ms| *ms <= MAX_DELAY_MS).ok_or_else(|| {
            at(format!("ONE_WAY_DELAY_MS '{delay}' is not a whole number of milliseconds 0..={MAX_DELAY_MS}"))
        })?;
        if !seen.insert(listen) {
            return Err(at(format!("LISTEN_ADDR {listen} is listed twice")));
        }
        routes.push(Route { listen, target, delay: Duration::from_millis(ms) });
    }
    if routes.is_empty() {
        return Err("the table has no routes".into());
    }
    Ok(routes)
}

/// When a chunk read at `read_at` is written on the other side: one one-way delay later.
fn deliver_at(read_at: Instant, delay: Duration) -> Instant {
    read_at + delay
}

/// When the relay connects to the target for a client accepted at `accepted`: after the three
/// one-way trips of TCP's handshake. The kernel completed the client's handshake at once, so
/// the relay pays it here instead, and the server's first bytes reach the client 4 one-way
/// delays (2 round trips) after its connect, as over a real link.
fn connect_at(accepted: Instant, delay: Duration) -> Instant {
    accepted + delay * 3
}

/// What a reader hands its writer, stamped with when it was read.
#[derive(Debug)]
enum Item {
    Data(Vec<u8>),
    Eof,
    Failed(std::io::Error),
}

/// Reads until end of stream or an error, stamping each chunk with the time it was read.
/// Always ends with `Eof` or `Failed`, so the writer learns how the stream ended.
async fn read_stamped(mut from: OwnedReadHalf, to: mpsc::UnboundedSender<(Instant, Item)>) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let item = match from.read(&mut buf).await {
            Ok(0) => Item::Eof,
            Ok(n) => Item::Data(buf[..n].to_vec()),
            Err(e) => Item::Failed(e),
        };
        let last = !matches!(item, Item::Data(_));
        // The writer gone means the connection is being torn down: nothing left to do.
        if to.send((Instant::now(), item)).is_err() || last {
            return Ok(());
        }
    }
}

/// Writes each chunk at its delivery time. End of stream becomes a half-close of `to`; a read
/// error becomes this direction's error, which ends the whole connection.
async fn write_delayed(
    mut from: mpsc::UnboundedReceiver<(Instant, Item)>,
    mut to: OwnedWriteHalf,
    delay: Duration,
) -> std::io::Result<()> {
    while let Some((read_at, item)) = from.recv().await {
        sleep_until(deliver_at(read_at, delay)).await;
        match item {
            Item::Data(bytes) => to.write_all(&bytes).await?,
            Item::Eof => {
                // The peer may already be gone; a failed half-close changes nothing then.
                let _ = to.shutdown().await;
                return Ok(());
            }
            Item::Failed(e) => return Err(e),
        }
    }
    Ok(())
}

/// Relays one accepted connection. Returns when both directions have ended; the first error
/// of either direction drops everything (both sockets close).
async fn serve(client: TcpStream, target: SocketAddr, delay: Duration) -> std::io::Result<()> {
    let accepted = Instant::now();
    client.set_nodelay(true)?;
    let (client_r, client_w) = client.into_split();
    let (up_tx, up_rx) = mpsc::unbounded_channel();
    // The client's bytes are stamped from the start, while the handshake delay runs.
    let up_reader = read_stamped(client_r, up_tx);
    let rest = async move {
        sleep_until(connect_at(accepted, delay)).await;
        let server = TcpStream::connect(target).await?;
        server.set_nodelay(true)?;
        let (server_r, server_w) = server.into_split();
        let (down_tx, down_rx) = mpsc::unbounded_channel();
        tokio::try_join!(
            write_delayed(up_rx, server_w, delay),
            read_stamped(server_r, down_tx),
            write_delayed(down_rx, client_w, delay),
        )
        .map(|_| ())
    };
    tokio::try_join!(up_reader, rest).map(|_| ())
}

async fn listen(route: Route) -> std::io::Result<impl std::future::Future<Output = ()>> {
    let listener = TcpListener::bind(route.listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", route.listen)))?;
    Ok(async move {
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    let route = route.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve(client, route.target, route.delay).await {
                            // Connection-level: the peers see it as a closed connection.
                            eprintln!("delay_relay: {} -> {}: {e}", route.listen, route.target);
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    eprintln!("delay_relay: accept on {}: {e}", route.listen);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

fn fail(msg: String) -> ! {
    eprintln!("delay_relay: {msg}");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut ready, mut table) = (None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--ready" => ready = Some(args.next().unwrap_or_else(|| fail("--ready needs a FILE".into()))),
            "-h" | "--help" => {
                eprintln!("usage: delay_relay [--ready FILE] TABLE|-   (TABLE: LISTEN_ADDR TARGET_ADDR ONE_WAY_DELAY_MS lines)");
                return;
            }
            _ if table.is_none() => table = Some(a),
            _ => fail(format!("unexpected argument '{a}'")),
        }
    }
    let table = table.unwrap_or_else(|| "-".into());
    let text = if table == "-" { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(&table) }
        .unwrap_or_else(|e| fail(format!("cannot read the table {table}: {e}")));
    let routes = parse_table(&text).unwrap_or_else(|e| fail(format!("{table}: {e}")));
    let mut loops = Vec::new();
    for route in routes {
        loops.push(listen(route).await.unwrap_or_else(|e| fail(e.to_string())));
    }
    if let Some(path) = ready {
        std::fs::write(&path, format!("{} routes\n", loops.len()))
            .unwrap_or_else(|e| fail(format!("cannot write {path}: {e}")));
    }
    futures::future::join_all(loops).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_routes_comments_and_blank_lines() {
        let t = "# lab w1\n\n127.111.0.11:22 198.18.111.11:22 25\n127.111.0.12:22 198.18.111.12:22 0 # direct\n";
        let r = parse_table(t).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].listen, "127.111.0.11:22".parse().unwrap());
        assert_eq!(r[0].target, "198.18.111.11:22".parse().unwrap());
        assert_eq!(r[0].delay, Duration::from_millis(25));
        assert_eq!(r[1].delay, Duration::ZERO);
    }

    #[test]
    fn bad_lines_are_named() {
        for (t, want) in [
            ("127.0.0.1:1 127.0.0.1:2", "line 1: expected 3 fields"),
            ("x\n127.0.0.1 127.0.0.1:2 5", "line 1"),
            ("127.0.0.1:1 127.0.0.1:2 5\n127.0.0.1 127.0.0.1:2 5", "line 2: LISTEN_ADDR '127.0.0.1' is not IP:PORT"),
            ("127.0.0.1:1 host:2 5", "TARGET_ADDR 'host:2'"),
            ("127.0.0.1:1 127.0.0.1:2 -1", "ONE_WAY_DELAY_MS '-1'"),
            ("127.0.0.1:1 127.0.0.1:2 2.5", "ONE_WAY_DELAY_MS '2.5'"),
            ("127.0.0.1:1 127.0.0.1:2 25000", "ONE_WAY_DELAY_MS '25000'"),
            ("127.0.0.1:1 127.0.0.1:2 1\n127.0.0.1:1 127.0.0.1:3 1", "line 2: LISTEN_ADDR 127.0.0.1:1 is listed twice"),
            ("# nothing\n", "no routes"),
        ] {
            let e = parse_table(t).unwrap_err();
            assert!(e.contains(want), "{t:?}: {e}");
        }
    }

    #[test]
    fn schedule_delays_by_one_way_and_connects_after_the_handshake() {
        let t0 = Instant::now();
        let d = Duration::from_millis(25);
        assert_eq!(deliver_at(t0, d), t0 + d);
        assert_eq!(connect_at(t0, d), t0 + Duration::from_millis(75));
        // The server's first byte, written when the relay connects, reaches the client two
        // round trips after its connect.
        assert_eq!(deliver_at(connect_at(t0, d), d) - t0, 4 * d);
        assert_eq!(connect_at(t0, Duration::ZERO), t0);
    }

    /// Bytes and order are kept, and a half-close passes through: an echo server behind the
    /// relay gets 1 MiB, returns it, and the client reads it back up to end of stream.
    #[tokio::test]
    async fn relays_bytes_in_order_and_half_close() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let (mut r, mut w) = s.split();
            tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = relay.local_addr().unwrap();
        tokio::spawn(async move {
            let (c, _) = relay.accept().await.unwrap();
            serve(c, target, Duration::from_millis(1)).await.unwrap();
        });
        let data: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let c = TcpStream::connect(at).await.unwrap();
        let (mut r, mut w) = c.into_split();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&sent).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let mut back = Vec::new();
        r.read_to_end(&mut back).await.unwrap();
        writer.await.unwrap();
        assert!(back == data, "got {} bytes back, sent {}", back.len(), data.len());
    }

    /// A target that refuses the connection ends the client's connection too (no hang).
    #[tokio::test]
    async fn refused_target_closes_the_client() {
        let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = gone.local_addr().unwrap();
        drop(gone);
        let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = relay.local_addr().unwrap();
        let served = tokio::spawn(async move {
            let (c, _) = relay.accept().await.unwrap();
            serve(c, target, Duration::ZERO).await
        });
        let mut c = TcpStream::connect(at).await.unwrap();
        let mut buf = Vec::new();
        // End of stream or a reset: either way the read returns.
        let _ = c.read_to_end(&mut buf).await;
        assert!(served.await.unwrap().is_err());
        assert!(buf.is_empty());
    }
}
