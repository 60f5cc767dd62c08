// coffer's own script for the console: the little that htmx does not do.
// Loaded as a file (the Content-Security-Policy allows no inline script).
"use strict";

// A one-time setup link carries its token in the fragment
// (/ui/setup#coffersetup_...), which browsers never send: no proxy or
// access log sees it. Move it into the form, and out of the address bar.
document.addEventListener("DOMContentLoaded", function () {
  var token = document.getElementById("setup-token");
  if (token && location.hash.length > 1) {
    token.value = decodeURIComponent(location.hash.slice(1));
    history.replaceState(null, "", location.pathname);
  }
});

// Keep the log of a running task scrolled to its end while the reader is
// at the end (reading further up stops the following).
document.addEventListener("htmx:sseMessage", function (ev) {
  var log = document.getElementById("log");
  if (log && ev.detail && ev.detail.type === "log") {
    var atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    if (atEnd) {
      window.scrollTo(0, document.body.scrollHeight);
    }
  }
});

// Select a new token's secret when it appears, ready to copy.
document.addEventListener("htmx:afterSwap", function () {
  var secret = document.getElementById("token-secret") || document.getElementById("setup-link");
  if (secret) {
    secret.focus();
    secret.select();
  }
});

// Security keys and passkeys (WebAuthn): the browser talks to the key.
// Before the Account page's "Add a security key" form or the second
// step's "Use your security key" form is sent, ask the API for the
// ceremony's options (its challenge, kept by the server in the session),
// have the key answer them, and send the answer in the form.
function securityKeyForm(form, optionsURL, field, create) {
  var error = document.getElementById("key-error");
  form.addEventListener("submit", function (ev) {
    if (field.value !== "") {
      return;
    }
    ev.preventDefault();
    error.hidden = true;
    fetch(optionsURL, { method: "POST", credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) {
            throw new Error(body.detail || r.statusText);
          }
          return body.public_key;
        });
      })
      .then(function (options) {
        return create
          ? navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
          : navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
      })
      .then(function (credential) {
        field.value = JSON.stringify(credential.toJSON());
        form.submit();
      })
      .catch(function (e) {
        error.textContent = "The security key did not answer: " + (e.message || e.name);
        error.hidden = false;
      });
  });
}

document.addEventListener("DOMContentLoaded", function () {
  var add = document.getElementById("key-add");
  if (add) {
    securityKeyForm(add, "/api/v1/access/users/" + encodeURIComponent(add.dataset.user) + "/security-keys/registration",
      document.getElementById("key-credential"), true);
  }
  var signIn = document.getElementById("key-sign-in");
  if (signIn) {
    securityKeyForm(signIn, "/api/v1/access/second-factor/security-key/challenge", document.getElementById("key-answer"), false);
  }
});
