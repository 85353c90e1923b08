//! The one table from failures to HTTP statuses and CouchDB error bodies.

use hyper::StatusCode;
use settee_engine::{EngineError, LimitError};
use settee_mango::MangoError;
use settee_views::ViewError;

/// Every way a request can fail, each with exactly one status and `{"error", "reason"}` body,
/// as Apache CouchDB 3.x answers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    QueryParse(String),
    #[error("{0}")]
    NotFound(String),
    #[error("Document update conflict.")]
    Conflict,
    /// An attachment edit naming a revision the document never had: CouchDB answers 409
    /// with `not_found` / `missing_rev`.
    #[error("missing_rev")]
    MissingRev,
    #[error("The database could not be created, the file already exists.")]
    FileExists,
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("Invalid attachment stub in {doc} for {name}")]
    MissingStub { doc: String, name: String },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// A write that would grow a partition past `[couchdb] max_partition_size` (the id).
    #[error("Partition limit exceeded due to update on '{0}'")]
    PartitionOverflow(String),
    /// Reason is the document id, as CouchDB reports it.
    #[error("{0}")]
    DocumentTooLarge(String),
    #[error("the request entity is too large")]
    RequestTooLarge,
    /// The request body stalled for longer than the body timeout.
    #[error("The request body did not arrive in time.")]
    RequestTimeout,
    #[error("{0}")]
    IllegalDatabaseName(String),
    /// A document id CouchDB's `couch_doc:validate_docid` refuses.
    #[error("{0}")]
    IllegalDocId(String),
    /// A partition name CouchDB's `couch_partition:validate_partition` refuses.
    #[error("{0}")]
    IllegalPartition(String),
    #[error("{0}")]
    DocValidation(String),
    #[error("Only {0} allowed")]
    MethodNotAllowed(&'static str),
    #[error("Content-Type must be {0}")]
    BadContentType(&'static str),
    /// A request body in a `Content-Encoding` other than `gzip` or `identity`.
    #[error("{0} is not a supported content encoding.")]
    UnsupportedEncoding(String),
    #[error("{0}")]
    NotImplemented(String),
    /// An endpoint CouchDB removed (`_temp_view`).
    #[error("{0}")]
    Gone(String),
    /// A `Range` no byte of the attachment satisfies.
    #[error("Requested range not satisfiable")]
    RangeNotSatisfiable,
    #[error("{0}")]
    ServiceUnavailable(String),
    /// The disk holding the data is full (CouchDB 3.4+'s disk monitor answers the same).
    #[error("{0}")]
    InsufficientStorage(String),
    #[error("{0}")]
    InvalidDesignDoc(String),
    #[error("{0}")]
    Compilation(String),
    /// JavaScript could not run to completion (time or memory limit, reduce error).
    #[error("{0}")]
    OsProcess(String),
    /// A JavaScript function threw (a `_changes` filter): CouchDB answers 500 with the
    /// error's name (`TypeError`, `ReferenceError`, ...) as `error`.
    #[error("{reason}")]
    JsThrew { name: &'static str, reason: String },
    /// What a show, list or update function threw (`render_error`, or the `error` of a thrown
    /// `{error, reason}` object).
    #[error("{reason}")]
    Render { error: String, reason: String },
    /// No `provides()` of a show or list function matches the request's `Accept` or
    /// `format`.
    #[error("{0}")]
    NotAcceptable(String),
    #[error("{0}")]
    BuiltinReduce(String),
    #[error("{0}")]
    ReduceOverflow(String),
    #[error("{0}")]
    Internal(String),
    /// A change no copy of the database took (CouchDB: 500 `error` / `no_majority`): what it
    /// answers for a `_security` object whose names or roles are not lists of strings, which
    /// each shard refuses.
    #[error("no_majority")]
    NoMajority,
    /// The stored record of one document does not decode (issue 18); the reason says what is
    /// wrong and how an admin removes it.
    #[error("{0}")]
    CorruptDocument(String),
    /// Mango's errors carry CouchDB's status and error name themselves.
    #[error("{0}")]
    Mango(#[from] MangoError),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_)
            | ApiError::QueryParse(_)
            | ApiError::IllegalDatabaseName(_)
            | ApiError::IllegalDocId(_)
            | ApiError::IllegalPartition(_)
            | ApiError::DocValidation(_)
            | ApiError::InvalidDesignDoc(_)
            | ApiError::Compilation(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::PartitionOverflow(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict | ApiError::MissingRev => StatusCode::CONFLICT,
            ApiError::FileExists
            | ApiError::PreconditionFailed(_)
            | ApiError::MissingStub { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::DocumentTooLarge(_) | ApiError::RequestTooLarge => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::BadContentType(_) | ApiError::UnsupportedEncoding(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            ApiError::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Internal(_)
            | ApiError::NoMajority
            | ApiError::CorruptDocument(_)
            | ApiError::OsProcess(_)
            | ApiError::JsThrew { .. }
            | ApiError::Render { .. }
            | ApiError::BuiltinReduce(_)
            | ApiError::ReduceOverflow(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Mango(error) => {
                StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST)
            }
        }
    }

    /// The `error` member of the JSON body.
    pub fn code(&self) -> &str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::QueryParse(_) => "query_parse_error",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict => "conflict",
            ApiError::MissingRev => "not_found",
            ApiError::FileExists => "file_exists",
            ApiError::PreconditionFailed(_) => "precondition_failed",
            ApiError::MissingStub { .. } => "missing_stub",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::PartitionOverflow(_) => "partition_overflow",
            ApiError::DocumentTooLarge(_) => "document_too_large",
            ApiError::RequestTooLarge => "too_large",
            ApiError::RequestTimeout => "request_timeout",
            ApiError::IllegalDatabaseName(_) => "illegal_database_name",
            ApiError::IllegalDocId(_) => "illegal_docid",
            ApiError::IllegalPartition(_) => "illegal_partition",
            ApiError::DocValidation(_) => "doc_validation",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::BadContentType(_) | ApiError::UnsupportedEncoding(_) => "bad_content_type",
            ApiError::NotImplemented(_) => "not_implemented",
            ApiError::Gone(_) => "gone",
            ApiError::RangeNotSatisfiable => "requested_range_not_satisfiable",
            ApiError::ServiceUnavailable(_) => "service_unavailable",
            ApiError::InsufficientStorage(_) => "insufficient_storage",
            ApiError::Internal(_) => "unknown_error",
            ApiError::CorruptDocument(_) => "corrupt_document",
            ApiError::Mango(error) => error.error(),
            ApiError::InvalidDesignDoc(_) => "invalid_design_doc",
            ApiError::Compilation(_) => "compilation_error",
            ApiError::OsProcess(_) => "os_process_error",
            ApiError::JsThrew { name, .. } => name,
            ApiError::Render { error, .. } => error,
            ApiError::NoMajority => "error",
            ApiError::NotAcceptable(_) => "not_acceptable",
            ApiError::BuiltinReduce(_) => "builtin_reduce_error",
            ApiError::ReduceOverflow(_) => "reduce_overflow_error",
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": self.code(), "reason": self.to_string()})
    }

    pub fn db_not_found() -> ApiError {
        ApiError::NotFound("Database does not exist.".into())
    }

    pub fn missing() -> ApiError {
        ApiError::NotFound("missing".into())
    }

    pub fn deleted() -> ApiError {
        ApiError::NotFound("deleted".into())
    }

    pub fn invalid_json() -> ApiError {
        ApiError::BadRequest("invalid UTF-8 JSON".into())
    }

    /// CouchDB's reason when its disk monitor blocks writes.
    pub fn insufficient_storage() -> ApiError {
        ApiError::InsufficientStorage("database_dir is too full".into())
    }

    pub fn not_admin() -> ApiError {
        ApiError::Unauthorized("You are not a server admin.".into())
    }

    /// A document past the engine's document limits: 413 naming the document when too large,
    /// 400 with the same reason as the request check otherwise.
    pub fn over_limit(error: &LimitError, id: &str) -> ApiError {
        match error {
            LimitError::TooLarge { .. } => ApiError::DocumentTooLarge(id.to_string()),
            LimitError::TooDeep { max } => {
                ApiError::BadRequest(format!("JSON nesting deeper than {max} levels"))
            }
            LimitError::InvalidJson(reason) => ApiError::BadRequest(reason.to_string()),
        }
    }
}

impl From<settee_http_wire::encoding::DecodeError> for ApiError {
    fn from(error: settee_http_wire::encoding::DecodeError) -> ApiError {
        use settee_http_wire::encoding::DecodeError;
        match error {
            DecodeError::Unsupported(encoding) => ApiError::UnsupportedEncoding(encoding),
            DecodeError::TooLarge => ApiError::RequestTooLarge,
            error => ApiError::BadRequest(error.to_string()),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> ApiError {
        match error {
            EngineError::Invalid(reason) => ApiError::BadRequest(reason),
            // A replica vbucket (docs/format/replica.md) until requests are routed by the map.
            error @ EngineError::NotMyVbucket { .. } => {
                ApiError::ServiceUnavailable(error.to_string())
            }
            EngineError::Unavailable(reason) => ApiError::ServiceUnavailable(reason),
            error if error.is_insufficient_storage() => ApiError::insufficient_storage(),
            EngineError::CorruptDocument(reason) => ApiError::CorruptDocument(format!(
                "the stored record of this document does not decode ({reason}); a database \
                 admin can remove it with POST /{{db}}/_purge {{\"{{id}}\": [\"{{any rev}}\"]}}"
            )),
            // Storage errors show no file path (settee-storage logs the full message).
            error => {
                tracing::error!(%error, "engine error");
                ApiError::Internal(error.to_string())
            }
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

impl From<ViewError> for ApiError {
    fn from(error: ViewError) -> ApiError {
        match error {
            ViewError::InvalidDesign(reason) => ApiError::InvalidDesignDoc(reason),
            ViewError::Compilation(reason) => ApiError::Compilation(reason),
            ViewError::Build(reason) => ApiError::OsProcess(reason),
            ViewError::Reduce(reason) => ApiError::OsProcess(reason),
            ViewError::BuiltinReduce(reason, _) => ApiError::BuiltinReduce(reason),
            ViewError::ReduceOverflow(reason) => ApiError::ReduceOverflow(reason),
            ViewError::InsufficientStorage => {
                ApiError::InsufficientStorage("not enough room to update index".into())
            }
            other => {
                tracing::error!(error = %other, "view error");
                ApiError::Internal(other.to_string())
            }
        }
    }
}
