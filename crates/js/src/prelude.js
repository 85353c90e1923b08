// The design-document sandbox, evaluated once per QuickJS runtime (see runtime.rs). It plays the
// part of CouchDB's couchjs main.js: the globals map functions expect (emit, log, sum, toJSON,
// isArray, require) and the entry points Rust calls. Every entry point takes and returns JSON
// text, so one call crosses the Rust/JS boundary for a whole batch of documents.
(function () {
  "use strict";
  var global = globalThis;
  var programs = {};
  var programCount = 0;
  var emitted = null;
  var logs = [];

  global.emit = function (key, value) {
    if (emitted === null) {
      throw new Error("emit() may only be called from a map function");
    }
    emitted.push([key === undefined ? null : key, value === undefined ? null : value]);
  };
  global.log = function (message) {
    if (logs.length < 100) {
      logs.push(typeof message === "string" ? message : JSON.stringify(message));
    }
  };
  global.sum = function (values) {
    var total = 0;
    for (var i = 0; i < values.length; i++) {
      total += values[i];
    }
    return total;
  };
  global.toJSON = function (value) {
    return JSON.stringify(value);
  };
  global.isArray = function (value) {
    return Array.isArray(value);
  };

  // Running out of memory is the sandbox's limit, not the function's error: it must reach Rust,
  // which replaces the runtime, instead of being reported as one document's failure.
  function rethrowFatal(error) {
    if (error instanceof InternalError && String(error.message).indexOf("out of memory") >= 0) {
      throw error;
    }
    // QuickJS throws null when the memory limit leaves no room for its "out of memory" error
    // (where that happens depends on the heap's layout, so any change to this file can move
    // it). The unwinding has freed the memory by now: say what happened. A function that
    // throws null itself is taken for the same.
    if (error === null) {
      throw new InternalError("out of memory");
    }
  }

  function describe(error) {
    if (error && typeof error === "object") {
      if (error.error && error.reason) {
        return String(error.error) + ": " + String(error.reason);
      }
      if (error.message !== undefined) {
        return String(error.name || "Error") + ": " + String(error.message);
      }
      try {
        return JSON.stringify(error);
      } catch (ignored) {
        return String(error);
      }
    }
    return String(error);
  }

  // Compiles function source the way CouchDB does: the text must evaluate to a function. As
  // CouchDB 3.5 does, a source whose function is followed by `;` (common in real design
  // documents) is accepted: the trailing semicolons are dropped when the text does not
  // compile with them.
  function compileFunction(source, what) {
    var fn;
    try {
      fn = (0, eval)("(" + source + "\n)");
    } catch (error) {
      var trimmed = String(source).replace(/[\s;]+$/, "");
      if (trimmed === String(source).replace(/\s+$/, "")) {
        throw compilationError("Compilation of " + what + " failed: " + describe(error));
      }
      try {
        fn = (0, eval)("(" + trimmed + "\n)");
      } catch (ignored) {
        throw compilationError("Compilation of " + what + " failed: " + describe(error));
      }
    }
    if (typeof fn !== "function") {
      throw compilationError("Compilation of " + what + " failed: Expression does not eval to a function. (" + source + ")");
    }
    return fn;
  }

  function compilationError(message) {
    var error = new Error(message);
    error.name = "compilation_error";
    return error;
  }

  // CommonJS require over a design document's string members (CouchDB: views see views.lib).
  function makeRequire(root) {
    var cache = {};
    function load(path) {
      if (cache.hasOwnProperty(path)) {
        return cache[path].exports;
      }
      var node = root;
      var parts = path.split("/");
      for (var i = 0; i < parts.length; i++) {
        if (node === null || typeof node !== "object" || !node.hasOwnProperty(parts[i])) {
          throw {error: "invalid_require_path", reason: "Object has no property \"" + parts[i] + "\". " + JSON.stringify(path)};
        }
        node = node[parts[i]];
      }
      if (typeof node !== "string") {
        throw {error: "invalid_require_path", reason: "Path " + path + " does not name a module"};
      }
      var module = {id: path, exports: {}};
      cache[path] = module;
      var wrapper = compileFunction("function (module, exports, require) {" + node + "\n}", "module " + path);
      var dir = parts.slice(0, -1);
      wrapper(module, module.exports, function (name) {
        return load(resolve(dir, name));
      });
      return module.exports;
    }
    function resolve(dir, name) {
      var parts = name.charAt(0) === "." ? dir.slice() : [];
      var steps = name.split("/");
      for (var i = 0; i < steps.length; i++) {
        if (steps[i] === "..") {
          if (parts.length === 0) {
            throw {error: "invalid_require_path", reason: "Object has no parent " + JSON.stringify(name)};
          }
          parts.pop();
        } else if (steps[i] !== "." && steps[i] !== "") {
          parts.push(steps[i]);
        }
      }
      return parts.join("/");
    }
    return function (name) {
      return load(resolve([], name));
    };
  }

  function deepFreeze(value) {
    if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
      Object.freeze(value);
      for (var name in value) {
        deepFreeze(value[name]);
      }
    }
    return value;
  }

  // spec: {"maps": [source], "reduces": [source or null], "filters": {name: source},
  //        "lib": design document members require() may load}
  function build(spec) {
    var require = makeRequire(spec.lib || {});
    global.require = require;
    var program = {maps: [], reduces: [], filters: {}};
    var names = spec.names || [];
    for (var i = 0; i < spec.maps.length; i++) {
      program.maps.push(compileFunction(spec.maps[i], "the map function in the '" + names[i] + "' view"));
    }
    var reduces = spec.reduces || [];
    for (var j = 0; j < reduces.length; j++) {
      program.reduces.push(reduces[j] === null ? null :
        compileFunction(reduces[j], "the reduce function in the '" + names[j] + "' view"));
    }
    var filters = spec.filters || {};
    for (var name in filters) {
      program.filters[name] = compileFunction(filters[name], "the filter function '" + name + "'");
    }
    if (spec.validate) {
      program.validate = compileFunction(spec.validate, "validate_doc_update");
      program.ddoc = deepFreeze(spec.lib || {});
    }
    program.require = require;
    // Render functions (shows, lists, updates) compile on first use: one that does not
    // compile fails its own requests, not the design document's views.
    program.design = spec.lib || {};
    program.rendered = {};
    return program;
  }

  function program(id) {
    var found = programs[id];
    if (!found) {
      throw new Error("program " + id + " is not loaded");
    }
    global.require = found.require;
    return found;
  }

  // ---- Render functions: _show, _list and _update ----
  // The API CouchDB's query server gives them: start(), send(), getRow(), provides() and
  // registerType(), with the response chosen by `?format=` or the Accept header.
  var defaultTypes = [
    ["all", ["*/*"]],
    ["text", ["text/plain; charset=utf-8", "txt"]],
    ["html", ["text/html; charset=utf-8"]],
    ["xhtml", ["application/xhtml+xml", "xhtml"]],
    ["xml", ["application/xml", "text/xml", "application/x-xml"]],
    ["js", ["text/javascript", "application/javascript", "application/x-javascript"]],
    ["css", ["text/css"]],
    ["ics", ["text/calendar"]],
    ["csv", ["text/csv"]],
    ["rss", ["application/rss+xml"]],
    ["atom", ["application/atom+xml"]],
    ["yaml", ["application/x-yaml", "text/yaml"]],
    ["multipart_form", ["multipart/form-data"]],
    ["url_encoded_form", ["application/x-www-form-urlencoded"]],
    ["json", ["application/json", "text/x-json"]]
  ];
  // The call in progress: {start, chunks, types, provided, rows, rowAt, sentHead}.
  var rendering = null;

  function inRender(what) {
    if (rendering === null) {
      throw new Error(what + "() may only be called from a show, list or update function");
    }
    return rendering;
  }
  global.start = function (resp) {
    inRender("start").start = resp || {};
  };
  global.send = function (chunk) {
    inRender("send").chunks.push(String(chunk));
  };
  global.getRow = function () {
    var call = inRender("getRow");
    if (call.rows === null || call.rowAt >= call.rows.length) {
      return null;
    }
    return call.rows[call.rowAt++];
  };
  global.registerType = function (key) {
    inRender("registerType").types[key] = Array.prototype.slice.call(arguments, 1);
  };
  global.provides = function (key, fn) {
    inRender("provides").provided.push([key, fn]);
  };

  function mediaRanges(header) {
    var ranges = [];
    var parts = String(header || "*/*").split(",");
    for (var i = 0; i < parts.length; i++) {
      var params = parts[i].split(";");
      var type = params[0].replace(/\s/g, "");
      if (type === "*") {
        type = "*/*";
      }
      var slash = type.indexOf("/");
      if (slash < 0) {
        continue;
      }
      var q = 1;
      for (var j = 1; j < params.length; j++) {
        var param = params[j].replace(/\s/g, "").split("=");
        if (param[0] === "q" && param.length === 2) {
          q = parseFloat(param[1]);
          if (isNaN(q) || q < 0 || q > 1) {
            q = 1;
          }
        }
      }
      ranges.push({type: type.slice(0, slash), sub: type.slice(slash + 1), q: q});
    }
    return ranges;
  }

  // How well `mime` (a registered type, parameters ignored) fits the request's ranges: the
  // most specific range it matches gives the quality; null when none matches.
  function fit(mime, ranges) {
    var base = String(mime).split(";")[0].replace(/\s/g, "");
    var slash = base.indexOf("/");
    if (slash < 0) {
      return null;
    }
    var type = base.slice(0, slash);
    var sub = base.slice(slash + 1);
    var best = null;
    for (var i = 0; i < ranges.length; i++) {
      var range = ranges[i];
      var typeOk = range.type === type || range.type === "*";
      var subOk = range.sub === sub || range.sub === "*";
      if (!typeOk || !subOk) {
        continue;
      }
      var specific = (range.type === type ? 2 : 0) + (range.sub === sub ? 1 : 0);
      if (best === null || specific > best.specific) {
        best = {specific: specific, q: range.q};
      }
    }
    return best;
  }

  // The provides() entry that answers: `?format=KEY` names it; else the best fit of the
  // Accept header (highest quality, then the most specific range, then the first provided).
  function chooseProvider(call, req) {
    var format = req.query && req.query.format;
    var i;
    if (format !== undefined) {
      for (i = 0; i < call.provided.length; i++) {
        if (call.provided[i][0] === format) {
          var mimes = call.types[format] || [];
          return {fn: call.provided[i][1], mime: mimes.length ? mimes[0] : null};
        }
      }
      return null;
    }
    var ranges = mediaRanges(headerOf(req, "Accept"));
    var chosen = null;
    for (i = 0; i < call.provided.length; i++) {
      var key = call.provided[i][0];
      var registered = call.types[key] || [];
      for (var j = 0; j < registered.length; j++) {
        var found = fit(registered[j], ranges);
        if (found === null || found.q <= 0) {
          continue;
        }
        if (chosen === null || found.q > chosen.q ||
            (found.q === chosen.q && found.specific > chosen.specific)) {
          chosen = {fn: call.provided[i][1], mime: registered[j], q: found.q, specific: found.specific};
        }
      }
    }
    return chosen;
  }

  function headerOf(req, name) {
    var headers = req.headers || {};
    var wanted = name.toLowerCase();
    for (var key in headers) {
      if (key.toLowerCase() === wanted) {
        return headers[key];
      }
    }
    return undefined;
  }

  function notAcceptable(call, req) {
    var offered = [];
    for (var i = 0; i < call.provided.length; i++) {
      offered = offered.concat(call.types[call.provided[i][0]] || []);
    }
    var asked = req.query && req.query.format !== undefined ? req.query.format : headerOf(req, "Accept");
    return {error: "not_acceptable", reason: "Content-Type " + asked +
      " not supported, try one of:\n" + offered.join(", ")};
  }

  function renderFunction(p, kind, name) {
    var compiled = p.rendered[kind] || (p.rendered[kind] = {});
    if (compiled.hasOwnProperty(name)) {
      return compiled[name];
    }
    var sources = p.design[kind];
    var source = sources && typeof sources === "object" && sources.hasOwnProperty(name) ? sources[name] : undefined;
    if (typeof source !== "string") {
      return null;
    }
    var what = {shows: "show", lists: "list", updates: "update"}[kind] + " function '" + name + "'";
    return (compiled[name] = compileFunction(source, what));
  }

  // A thrown value as CouchDB's error answer.
  function thrown(error) {
    if (error && typeof error === "object" && !(error instanceof Error)) {
      if (error.error !== undefined) {
        return {error: String(error.error), reason: String(error.reason === undefined ? "" : error.reason)};
      }
      if (error.forbidden !== undefined) {
        return {error: "forbidden", reason: String(error.forbidden)};
      }
      if (error.unauthorized !== undefined) {
        return {error: "unauthorized", reason: String(error.unauthorized)};
      }
    }
    return {error: "render_error", reason: "function raised error: " + describe(error)};
  }

  // Headers given to start(): CouchDB's {headers, code} form, or a plain map of headers.
  function startHeaders(start) {
    if (start === null) {
      return {headers: {}, code: undefined};
    }
    if (start.headers !== undefined || start.code !== undefined) {
      return {headers: start.headers || {}, code: start.code};
    }
    return {headers: start, code: undefined};
  }

  // The function's answer (a string, or {body, json, base64, headers, code}), the text
  // send() wrote before it, and the type provides() chose, as one response.
  function finishResponse(call, answer, sent, mime, defaultType) {
    var resp = {};
    if (answer !== null && typeof answer === "object") {
      for (var key in answer) {
        resp[key] = answer[key];
      }
    } else if (answer !== undefined && answer !== null) {
      sent += String(answer);
    }
    var head = startHeaders(call.start);
    var headers = {};
    var name;
    for (name in head.headers) {
      headers[name] = String(head.headers[name]);
    }
    for (name in resp.headers || {}) {
      headers[name] = String(resp.headers[name]);
    }
    // No code given: the server's default (200; 201 for an update that saved a document).
    var out = {headers: headers};
    var code = resp.code !== undefined ? resp.code : head.code;
    if (code !== undefined && code !== null) {
      out.code = code;
    }
    var typed = false;
    for (name in headers) {
      if (name.toLowerCase() === "content-type") {
        typed = true;
      }
    }
    if (resp.base64 !== undefined && sent === "") {
      out.base64 = String(resp.base64);
      if (!typed) {
        headers["Content-Type"] = mime || "application/binary";
      }
    } else if (resp.json !== undefined && sent === "") {
      out.body = JSON.stringify(resp.json);
      if (!typed) {
        headers["Content-Type"] = mime || "application/json";
      }
    } else {
      out.body = sent + (resp.body === undefined || resp.body === null ? "" : String(resp.body));
      if (!typed) {
        headers["Content-Type"] = mime || defaultType;
      }
    }
    return out;
  }

  // Calls `fn` with the render API in place; then, if it called provides(), the chosen
  // provider. Returns {answer, sent, mime} or {error, reason}.
  function callRendering(call, fn, self, args, req) {
    rendering = call;
    try {
      var answer = fn.apply(self, args);
      var sent = call.chunks.join("");
      call.chunks = [];
      var mime = null;
      if (call.provided.length) {
        var chosen = chooseProvider(call, req);
        if (chosen === null) {
          return notAcceptable(call, req);
        }
        mime = chosen.mime;
        if (typeof answer === "string") {
          sent += answer;
          answer = undefined;
        }
        var provided = chosen.fn();
        sent += call.chunks.join("");
        call.chunks = [];
        if (provided !== undefined) {
          answer = provided;
        }
      }
      return {answer: answer, sent: sent, mime: mime};
    } catch (error) {
      rethrowFatal(error);
      return thrown(error);
    } finally {
      rendering = null;
    }
  }

  function newCall(rows) {
    var types = {};
    for (var i = 0; i < defaultTypes.length; i++) {
      types[defaultTypes[i][0]] = defaultTypes[i][1];
    }
    return {start: null, chunks: [], types: types, provided: [], rows: rows, rowAt: 0};
  }

  function renderCall(p, kind, name, first, req) {
    var fn;
    try {
      fn = renderFunction(p, kind, name);
    } catch (error) {
      return {error: "compilation_error", reason: error.message};
    }
    if (fn === null) {
      return {error: "not_found", reason: "missing " + {shows: "show", lists: "list", updates: "update"}[kind] + " function " + name + " on design doc " + (p.design._id || "")};
    }
    if (kind === "lists") {
      var listCall = newCall(first.rows || []);
      var head = first.head || {};
      var listed = callRendering(listCall, fn, p.design, [head, req], req);
      if (listed.error !== undefined) {
        return listed;
      }
      return {ok: finishResponse(listCall, listed.answer, listed.sent, listed.mime, "application/json")};
    }
    var call = newCall(null);
    var result = callRendering(call, fn, p.design, [first, req], req);
    if (result.error !== undefined) {
      return result;
    }
    if (kind === "shows") {
      return {ok: finishResponse(call, result.answer, result.sent, result.mime, "text/html; charset=utf-8")};
    }
    var pair = result.answer;
    if (!Array.isArray(pair) || pair.length !== 2) {
      return {error: "render_error", reason: "undefined response from update function"};
    }
    var doc = pair[0] === undefined ? null : pair[0];
    return {ok: finishResponse(call, pair[1], result.sent, result.mime, "text/html; charset=utf-8"), doc: doc};
  }

  global.__settee = {
    loaded: function (id) {
      return programs.hasOwnProperty(id);
    },
    count: function () {
      return programCount;
    },
    // Returns "" when every function compiles, else the first compilation error.
    load: function (id, specJson) {
      try {
        programs[id] = build(JSON.parse(specJson));
        programCount++;
        return "";
      } catch (error) {
        return error && error.name === "compilation_error" ? error.message : describe(error);
      }
    },
    // docsJson: an array of documents. Returns {"rows": per document, per map function, the
    // [key, value] pairs it emitted; "errors": [[document index, function index, message]];
    // "logs": [...]}. A function that throws emits nothing for that document (CouchDB).
    map: function (id, docsJson) {
      var p = program(id);
      var docs = JSON.parse(docsJson);
      var out = [];
      var errors = [];
      logs = [];
      for (var d = 0; d < docs.length; d++) {
        var doc = deepFreeze(docs[d]);
        var perView = [];
        for (var f = 0; f < p.maps.length; f++) {
          emitted = [];
          try {
            p.maps[f](doc);
            perView.push(emitted);
          } catch (error) {
            rethrowFatal(error);
            errors.push([d, f, describe(error)]);
            perView.push([]);
          }
        }
        emitted = null;
        out.push(perView);
      }
      return JSON.stringify({rows: out, errors: errors, logs: logs});
    },
    // Returns {"ok": result} or {"error": message}.
    reduce: function (id, view, keysJson, valuesJson, rereduce) {
      var p = program(id);
      var fn = p.reduces[view];
      logs = [];
      try {
        var result = fn(rereduce ? null : JSON.parse(keysJson), JSON.parse(valuesJson), rereduce);
        return JSON.stringify({ok: result === undefined ? null : result, logs: logs});
      } catch (error) {
        rethrowFatal(error);
        return JSON.stringify({error: describe(error), logs: logs});
      }
    },
    // Runs validate_doc_update(newDoc, oldDoc, userCtx, secObj) with the design document as
    // `this`. Returns {"ok": true}, {"forbidden": m}, {"unauthorized": m}, {"unknown": m} (any
    // other thrown value) or {"error": message} (a thrown error).
    validate: function (id, newDocJson, oldDocJson, userCtxJson, secObjJson) {
      var p = program(id);
      if (!p.validate) {
        return JSON.stringify({ok: true});
      }
      logs = [];
      try {
        p.validate.call(p.ddoc, deepFreeze(JSON.parse(newDocJson)), deepFreeze(JSON.parse(oldDocJson)),
          JSON.parse(userCtxJson), JSON.parse(secObjJson));
        return JSON.stringify({ok: true, logs: logs});
      } catch (error) {
        rethrowFatal(error);
        if (error && typeof error === "object" && !(error instanceof Error)) {
          if (typeof error.forbidden !== "undefined") {
            return JSON.stringify({forbidden: String(error.forbidden), logs: logs});
          }
          if (typeof error.unauthorized !== "undefined") {
            return JSON.stringify({unauthorized: String(error.unauthorized), logs: logs});
          }
          // CouchDB reports the value of an object's (first) member.
          var keys = Object.keys(error);
          var value = keys.length ? error[keys[0]] : error;
          return JSON.stringify({unknown: typeof value === "string" ? value : JSON.stringify(value), logs: logs});
        }
        if (typeof error === "string") {
          return JSON.stringify({unknown: error, logs: logs});
        }
        return JSON.stringify({error: describe(error), logs: logs});
      }
    },
    // Runs the show (`kind` "shows"), update ("updates") or list ("lists") function `name`
    // of the program's design document over `first` (the document, or for a list
    // {head, rows}) and the request object. Returns {"ok": response} (response: {code,
    // headers, body | base64}), for an update also "doc" (the document to save, or null), or
    // {"error": name, "reason": text}.
    render: function (id, kind, name, firstJson, reqJson) {
      var p = program(id);
      logs = [];
      var answer = renderCall(p, kind, name, JSON.parse(firstJson), JSON.parse(reqJson));
      answer.logs = logs;
      return JSON.stringify(answer);
    },
    // Runs the design document's `rewrites` function (this: the design document) over the
    // request object. Returns {"ok": answer} (a string answer is the path), {"no_dispatch":
    // true} (no function, or a falsy answer), or {"error": name, "reason": text}.
    rewrite: function (id, reqJson) {
      var p = program(id), req = JSON.parse(reqJson), answer;
      logs = [];
      try {
        var fn = p.rendered.rewrite || (p.rendered.rewrite = compileFunction(p.design.rewrites, "the rewrite function"));
        answer = fn.call(p.design, req);
        answer = !answer ? {no_dispatch: true} : {ok: typeof answer === "string" ? {path: answer, method: req.method} : answer};
      } catch (error) {
        rethrowFatal(error);
        answer = error && error.name === "compilation_error" ? {error: "compilation_error", reason: error.message} : thrown(error);
        answer.error = answer.error === "render_error" ? "rewrite_error" : answer.error;
      }
      answer.logs = logs;
      return JSON.stringify(answer);
    },
    // Returns {"ok": boolean} or {"error": message}.
    filter: function (id, name, docJson, reqJson) {
      var p = program(id);
      var fn = p.filters[name];
      if (!fn) {
        return JSON.stringify({error: "missing filter " + name});
      }
      logs = [];
      try {
        return JSON.stringify({ok: !!fn(deepFreeze(JSON.parse(docJson)), JSON.parse(reqJson)), logs: logs});
      } catch (error) {
        rethrowFatal(error);
        return JSON.stringify({error: describe(error), logs: logs});
      }
    }
  };
})();
