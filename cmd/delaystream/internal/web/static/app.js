// delaystream web view: asks before destructive posts, refreshes the
// chart from the server, and the page's figures and tables (the elements
// marked data-refresh, read again from the page's own URL every
// data-refresh-every ms of <main>). No framework, no build step; the pages
// work without it (they then update on reload).
"use strict";
document.addEventListener("submit", function (ev) {
  var f = ev.target;
  var q = f.getAttribute("data-confirm");
  if (q && !window.confirm(q)) {
    ev.preventDefault();
  }
});
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("chart-box");
  if (!box) {
    return;
  }
  var every = Math.max(1000, parseInt(box.getAttribute("data-interval"), 10) || 5000);
  var src = box.getAttribute("data-src");
  setInterval(function () {
    fetch(src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) { box.innerHTML = html; } })
      .catch(function () {});
  }, every);
});
document.addEventListener("DOMContentLoaded", function () {
  var main = document.querySelector("main[data-refresh-every]");
  if (!main || !document.querySelector("[data-refresh]")) {
    return;
  }
  var every = Math.max(1000, parseInt(main.getAttribute("data-refresh-every"), 10) || 5000);
  setInterval(function () {
    if (document.hidden) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-refresh]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) {
            el.innerHTML = fresh.innerHTML;
          }
        });
      })
      .catch(function () {});
  }, every);
});
