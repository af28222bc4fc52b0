//! `GET /events`: one page's server-sent event stream, fed by the hub's broadcast; the
//! generator never waits for a page.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::Response;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use tokio::sync::{broadcast, mpsc, watch};

use super::{Live, PER_CLIENT, Reply};

/// The event stream of one page: the whole state, then every change. A page that falls
/// behind by more than the broadcast buffer gets a fresh snapshot instead of the changes it
/// missed; the generator never waits for a page.
pub(super) fn stream(live: &Arc<Live>, mut stopped: watch::Receiver<bool>) -> Reply {
    let (tx, rx) = mpsc::channel::<Bytes>(PER_CLIENT);
    let mut updates = live.subscribe();
    let first = live.snapshot();
    let live = live.clone();
    tokio::spawn(async move {
        // A reconnecting page waits 2 s, not the browser's default 3 s.
        if tx.send(Bytes::from_static(b"retry: 2000\n\n")).await.is_err() || tx.send(first).await.is_err() {
            return;
        }
        let mut keepalive = tokio::time::interval(Duration::from_secs(15));
        keepalive.tick().await;
        loop {
            let next = tokio::select! {
                u = updates.recv() => match u {
                    Ok(b) => b,
                    Err(broadcast::error::RecvError::Lagged(_)) => live.snapshot(),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = keepalive.tick() => Bytes::from_static(b": keepalive\n\n"),
                _ = stopped.changed() => return,
            };
            if tx.send(next).await.is_err() {
                return; // the page went away
            }
        }
    });
    let mut r = Response::new(EventBody { rx }.boxed());
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A response body fed by a channel, one frame per event. Written by hand: `http-body-util`
/// has `StreamBody`, but it needs a `Stream`, and the crate has no stream adaptor otherwise.
struct EventBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}
