//! Before a KV connection authenticates, kv_engine runs only HELLO, SASL_LIST_MECHS, SASL_AUTH,
//! SASL_STEP and GET_ERROR_MAP (`Cookie::validateClientRequest`); every other request — NOOP,
//! VERSION, the cluster map, SELECT_BUCKET, data requests, unknown opcodes, malformed ones — is
//! answered EACCESS and runs nothing, on an ordered connection and in an UnorderedExecution
//! pipeline alike. The connection stays open and, once authenticated, works as usual.

mod support;

use std::io::Write;

use settee_kv_codec::{feature, opcode, status};
use support::kv::{counter_extras, store_extras, Kv};
use support::{Client, Server};

/// An opcode kv_engine does not know.
const UNKNOWN_OPCODE: u8 = 0xee;

#[test]
fn only_the_handshake_runs_before_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    let mut setup = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let set = setup.call(opcode::SET, b"seen", &store_extras(0, 0), b"\"s\"", 0);
    assert_eq!(set.status, 0);

    let mut anonymous = Kv::connect(&server.kv_addr);
    anonymous.hello(&[feature::XERROR, feature::SELECT_BUCKET, feature::JSON]);
    let error_map = anonymous.call(opcode::GET_ERROR_MAP, b"", &[], &2u16.to_be_bytes(), 0);
    assert_eq!(error_map.status, 0);
    let mechanisms = anonymous.call(opcode::SASL_LIST_MECHS, b"", &[], &[], 0);
    assert_eq!(mechanisms.status, 0);
    assert!(String::from_utf8_lossy(&mechanisms.value).contains("SCRAM-SHA512"));

    // (opcode, key, extras, value)
    type Request<'a> = (u8, &'a [u8], Vec<u8>, &'a [u8]);
    let refused: Vec<Request> = vec![
        (opcode::NOOP, b"", vec![], b""),
        (opcode::VERSION, b"", vec![], b""),
        (opcode::GET_CLUSTER_CONFIG, b"", vec![], b""),
        (opcode::SELECT_BUCKET, b"default", vec![], b""),
        (opcode::GET_COLLECTIONS_MANIFEST, b"", vec![], b""),
        (opcode::STAT, b"", vec![], b""),
        (opcode::GET, b"seen", vec![], b""),
        (opcode::GETQ, b"seen", vec![], b""),
        (opcode::SET, b"new", store_extras(0, 0), b"{}"),
        (opcode::SETQ, b"new", store_extras(0, 0), b"{}"),
        (opcode::INCREMENT, b"n", counter_extras(1, 1, 0), b""),
        (opcode::DELETE, b"seen", vec![], b""),
        (opcode::QUIT, b"", vec![], b""),
        (UNKNOWN_OPCODE, b"", vec![], b""),
        // Malformed (a GET with extras): refused for want of authentication first.
        (opcode::GET, b"seen", vec![0; 8], b""),
    ];
    for (op, key, extras, value) in &refused {
        let reply = anonymous.call(*op, key, extras, value, 0);
        assert_eq!(
            reply.status,
            status::EACCESS,
            "opcode {op:#04x} before authentication"
        );
        assert!(
            !String::from_utf8_lossy(&reply.value).contains("nodesExt"),
            "opcode {op:#04x} gave out the cluster map"
        );
    }

    // The same requests pipelined on an UnorderedExecution connection (data requests are
    // answered in batches there).
    let mut unordered = Kv::connect(&server.kv_addr);
    unordered.hello(&[feature::XERROR, feature::UNORDERED_EXECUTION]);
    let mut frames = Vec::new();
    let mut opaques = Vec::new();
    for (op, key, extras, value) in &refused {
        opaques.push(unordered.encode(&mut frames, *op, key, extras, value, 0));
    }
    unordered.stream.write_all(&frames).unwrap();
    let mut answered = Vec::new();
    for _ in &refused {
        let reply = unordered.read().expect("a reply to each request");
        assert_eq!(reply.status, status::EACCESS, "opaque {}", reply.opaque);
        answered.push(reply.opaque);
    }
    answered.sort_unstable();
    assert_eq!(answered, opaques);

    // Nothing ran: the document is there, nothing new was stored.
    let get = setup.call(opcode::GET, b"seen", &[], &[], 0);
    assert_eq!((get.status, get.value.as_slice()), (0, &b"\"s\""[..]));
    for key in [&b"new"[..], b"n"] {
        assert_eq!(
            setup.call(opcode::GET, key, &[], &[], 0).status,
            status::KEY_ENOENT
        );
    }

    // Once authenticated, the same connections work.
    for kv in [&mut anonymous, &mut unordered] {
        assert_eq!(kv.auth("admin", "secret"), 0);
        assert_eq!(kv.call(opcode::NOOP, b"", &[], &[], 0).status, 0);
        assert_eq!(kv.call(opcode::VERSION, b"", &[], &[], 0).status, 0);
        let select = kv.call(opcode::SELECT_BUCKET, b"default", &[], &[], 0);
        assert_eq!(select.status, 0);
        let get = kv.call(opcode::GET, b"seen", &[], &[], 0);
        assert_eq!((get.status, get.value.as_slice()), (0, &b"\"s\""[..]));
    }
    server.stop();
}
