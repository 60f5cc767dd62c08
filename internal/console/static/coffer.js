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
