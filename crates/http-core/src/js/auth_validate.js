function (newDoc, oldDoc, userCtx, secObj) {
  // settee's validation of account documents (the users database's _design/_auth), with
  // the rules and answers of CouchDB 3.5's.
  var deny = function (reason) {
    throw ({forbidden: reason});
  };
  var isAdmin = function () {
    if (userCtx.roles.indexOf('_admin') !== -1) {
      return true;
    }
    var admins = (secObj && secObj.admins) || {};
    if ((admins.names || []).indexOf(userCtx.name) !== -1) {
      return true;
    }
    var roles = admins.roles || [];
    return userCtx.roles.some(function (role) {
      return roles.indexOf(role) !== -1;
    });
  };

  if (newDoc._deleted === true) {
    // Deletions: admins, and users of their own document.
    if (userCtx.roles.indexOf('_admin') !== -1 || userCtx.name == oldDoc.name) {
      return;
    }
    deny('Only admins may delete other user docs.');
  }
  if (newDoc.type !== 'user') {
    deny('doc.type must be user');
  }
  if (!newDoc.name) {
    deny('doc.name is required');
  }
  if (!newDoc.roles) {
    deny('doc.roles must exist');
  }
  if (!Array.isArray(newDoc.roles)) {
    deny('doc.roles must be an array');
  }
  newDoc.roles.forEach(function (role) {
    if (typeof role !== 'string') {
      deny('doc.roles can only contain strings');
    }
  });
  if (newDoc._id !== 'org.couchdb.user:' + newDoc.name) {
    deny('Doc ID must be of the form org.couchdb.user:name');
  }
  if (oldDoc && oldDoc.name !== newDoc.name) {
    deny('Usernames can not be changed.');
  }
  if (newDoc.password_sha && !newDoc.salt) {
    deny('Users with password_sha must have a salt.' +
      'See /_utils/script/couch.js for example code.');
  }
  var schemes = ['simple', 'pbkdf2', 'simple+pbkdf2'];
  if (newDoc.password_scheme && schemes.indexOf(newDoc.password_scheme) === -1) {
    deny('Password scheme `' + newDoc.password_scheme + '` not supported.');
  }
  if (newDoc.password_scheme === 'pbkdf2') {
    if (typeof newDoc.iterations !== 'number') {
      deny('iterations must be a number.');
    }
    if (typeof newDoc.derived_key !== 'string') {
      deny('derived_key must be a string.');
    }
  }
  if (!isAdmin()) {
    if (oldDoc) {
      if (userCtx.name !== newDoc.name) {
        deny('You may only update your own user document.');
      }
      var before = (oldDoc.roles || []).slice().sort();
      var after = newDoc.roles.slice().sort();
      var same = before.length === after.length && before.every(function (role, i) {
        return role === after[i];
      });
      if (!same) {
        deny('Only _admin may edit roles');
      }
    } else if (newDoc.roles.length > 0) {
      deny('Only _admin may set roles');
    }
  }
  newDoc.roles.forEach(function (role) {
    // No system roles but _metrics.
    if (role !== '_metrics' && role.charAt(0) === '_') {
      deny('No system roles (starting with underscore) in users db.');
    }
  });
  if (newDoc.name.charAt(0) === '_') {
    deny('Username may not start with underscore.');
  }
  if (newDoc.name.indexOf(':') !== -1) {
    deny('Character `:` is not allowed in usernames.');
  }
}
