//! `http::run` end to end against a stub server that answers 200 to everything.

use std::convert::Infallible;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use settee_bench::http::{run, HttpArgs};
use tokio::net::TcpListener;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    http: HttpArgs,
}

/// `_bulk_docs` answers an (empty) array of per-document results, as CouchDB does; everything
/// else answers `{"ok":true}`.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let bulk = request.method() == Method::POST && request.uri().path().ends_with("/_bulk_docs");
    // Read the request body as a real server does; hyper closes connections whose body was left.
    let _ = request.into_body().collect().await;
    let body = if bulk { "[]" } else { r#"{"ok":true}"# };
    Ok(Response::new(Full::new(Bytes::from_static(
        body.as_bytes(),
    ))))
}

async fn serve(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_phases_count_ops_and_no_errors() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("local address");
    let server = tokio::spawn(serve(listener));

    let url = format!("http://{address}");
    let cli = Cli::try_parse_from([
        "bench",
        "--url",
        &url,
        "--password",
        "password",
        "--connections",
        "4",
        "--duration-secs",
        "1",
        "--docs",
        "2500",
        "--json",
    ])
    .expect("flags parse");
    let reports = run(cli.http).await.expect("bench runs");
    server.abort();

    let names: Vec<&str> = reports.iter().map(|report| report.name.as_str()).collect();
    assert_eq!(names, ["get", "put"]);
    for report in &reports {
        assert!(report.ops > 0, "{report:?}");
        assert_eq!(report.errors, 0, "{report:?}");
        assert!(report.p50_us <= report.p99_us && report.p99_us <= report.p999_us);
    }
}
