// Small page behaviours of our own, no framework:
//  - [data-live-url]: refresh the element's inner HTML from that URL every data-live-interval
//    ms (default 2000) without reloading the page; stops when the fragment sets data-live-done.
//  - <time datetime>: show UTC timestamps in the browser's local time, keeping UTC in the title.
//  - [data-confirm]: ask before submitting a destructive form or following a link.
(function () {
  "use strict";
  function localiseTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (el.dataset.localised) return;
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      el.title = el.textContent.trim();
      el.textContent = when.toLocaleString();
      el.dataset.localised = "1";
    });
  }
  function refresh(el) {
    var url = el.dataset.liveUrl;
    fetch(url, {headers: {"X-Requested-With": "fetch"}, credentials: "same-origin"})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        el.innerHTML = html;
        localiseTimes(el);
        el.dispatchEvent(new CustomEvent("live:updated", {bubbles: true}));
        el.classList.remove("stale");
      })
      .catch(function () { el.classList.add("stale"); })
      .finally(function () {
        var done = el.querySelector("[data-live-done]");
        if (!done) setTimeout(function () { refresh(el); }, parseInt(el.dataset.liveInterval || "2000", 10));
      });
  }
  document.addEventListener("DOMContentLoaded", function () {
    localiseTimes(document);
    document.querySelectorAll("[data-live-url]").forEach(function (el) {
      setTimeout(function () { refresh(el); }, parseInt(el.dataset.liveInterval || "2000", 10));
    });
    document.addEventListener("submit", function (ev) {
      var msg = ev.target.dataset && ev.target.dataset.confirm;
      if (msg && !window.confirm(msg)) ev.preventDefault();
    }, true);
    document.addEventListener("click", function (ev) {
      var a = ev.target.closest && ev.target.closest("a[data-confirm]");
      if (a && !window.confirm(a.dataset.confirm)) ev.preventDefault();
    }, true);
  });
  window.Tiergate = {localiseTimes: localiseTimes};
})();
