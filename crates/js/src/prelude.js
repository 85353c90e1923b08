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
