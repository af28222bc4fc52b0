use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Accepts that keep failing (EMFILE) are retried a few times a second, not in a hot loop:
/// over 10 s (of paused, virtual time) the pauses grow from 10 ms to 1 s, about 16 tries.
#[tokio::test(start_paused = true)]
async fn failed_accepts_back_off_instead_of_spinning() {
    let mut backoff = Backoff::new("test");
    let emfile = std::io::Error::from_raw_os_error(24);
    let mut tries = 0u64;
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            backoff.ready().await;
            tries += 1;
            backoff.failed(&emfile);
        }
    })
    .await;
    assert!((10..=20).contains(&tries), "{tries} tries in 10 s");
    assert_eq!(backoff.failures(), tries);
    backoff.succeeded();
    assert_eq!(backoff.failures(), 0);
    // A success resets the pause: the next failure waits 10 ms again.
    backoff.failed(&emfile);
    let started = Instant::now();
    backoff.ready().await;
    assert_eq!(started.elapsed(), Duration::from_millis(10));
}

/// Over the cap a connection is answered 503 and closed; a place freed is taken again.
#[tokio::test]
async fn connections_over_the_cap_are_answered_503_and_closed() {
    let listener = crate::net::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = Limits { max_connections: Some(4), header_timeout: None };
    let mut acceptor = Acceptor::new(listener, &limits, "test");
    assert_eq!(acceptor.cap(), Some(4));
    let mut clients = Vec::new();
    let mut held = Vec::new();
    for _ in 0..4 {
        clients.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        held.push(acceptor.accept().await);
    }
    let mut over = tokio::net::TcpStream::connect(addr).await.unwrap();
    let serving = tokio::spawn(async move {
        let next = acceptor.accept().await;
        (acceptor, next)
    });
    let mut text = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), over.read_to_end(&mut text)).await;
    assert!(read.is_ok(), "the connection over the cap was not closed");
    assert!(text.is_empty() || text.starts_with(b"HTTP/1.1 503"), "{}", String::from_utf8_lossy(&text));
    drop(held.pop());
    let mut again = tokio::net::TcpStream::connect(addr).await.unwrap();
    again.write_all(b"x").await.unwrap();
    let (_, next) = tokio::time::timeout(Duration::from_secs(20), serving).await.expect("accepted").unwrap();
    assert!(next.permit.is_some());
}

#[test]
fn a_listener_gets_at_most_a_quarter_of_the_descriptors() {
    let limit = fds::limit().unwrap();
    assert_eq!(fds::share(1), 4);
    assert!(fds::share(usize::MAX) as u64 <= (limit / 4).max(4));
    let mut reserve = fds::Reserve::hold(3);
    assert_eq!(reserve.len(), 3);
    reserve.release();
    assert!(reserve.is_empty());
}
