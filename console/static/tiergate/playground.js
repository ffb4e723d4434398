// Playground: each pending side streams its answer as server-sent events:
//   delta {content, reasoning}   appended as it arrives
//   done  {status, text, ttft_ms, tpot_ms, prompt_tokens, completion_tokens, tier, error}
//   busy  {message}              another page is streaming this side
(function () {
  "use strict";
  function fmt(ms) { return ms === null || ms === undefined ? "—" : ms.toFixed(1); }
  function field(section, name) { return section.querySelector('[data-field="' + name + '"]'); }
  function start(section) {
    var source = new EventSource(section.getAttribute("data-stream-url"));
    var text = field(section, "text"), reasoning = field(section, "reasoning");
    field(section, "status").textContent = "Streaming";
    source.addEventListener("delta", function (ev) {
      var d = JSON.parse(ev.data);
      if (d.content) { text.textContent += d.content; }
      if (d.reasoning) { reasoning.textContent += d.reasoning; reasoning.closest("details").hidden = false; }
    });
    source.addEventListener("done", function (ev) {
      var r = JSON.parse(ev.data);
      source.close();
      field(section, "status").textContent = r.status === "done" ? "Done" : "Failed";
      field(section, "ttft_ms").textContent = fmt(r.ttft_ms);
      field(section, "tpot_ms").textContent = fmt(r.tpot_ms);
      field(section, "tier").textContent = r.tier;
      field(section, "tokens").textContent = r.completion_tokens === null ? "—" :
        (r.prompt_tokens === null ? "?" : r.prompt_tokens) + " in / " + r.completion_tokens + " out";
      text.textContent = r.text;
      field(section, "error").textContent = r.error || "";
      section.setAttribute("data-finished", r.status);
    });
    source.addEventListener("busy", function (ev) {
      source.close();
      field(section, "error").textContent = JSON.parse(ev.data).message;
    });
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) { return; }
      source.close();  // no automatic retry: a retry would replay, not resume
      if (!section.hasAttribute("data-finished")) {
        field(section, "error").textContent = "The stream broke; reload to see what was saved.";
      }
    };
  }
  // The form: each side's model box suggests the chosen endpoint's models (a <datalist>) and
  // shows its default model as the placeholder.
  function offerModels(known, side) {
    var select = document.getElementById("id_endpoint_" + side);
    var box = document.getElementById("id_model_" + side);
    var list = document.getElementById("models-" + side);
    if (!select || !box || !list) { return; }
    function refill() {
      var entry = known[select.value] || {models: [], "default": ""};
      list.textContent = "";
      entry.models.forEach(function (m) {
        var opt = document.createElement("option"); opt.value = m; list.appendChild(opt);
      });
      if (entry.models.length === 0 && entry["default"]) {
        var only = document.createElement("option"); only.value = entry["default"]; list.appendChild(only);
      }
      box.placeholder = entry["default"] ? entry["default"] + " (default)" : "no model known: name one";
    }
    select.addEventListener("change", refill);
    refill();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("section.side[data-stream-url]").forEach(start);
    var data = document.getElementById("endpoint-models");
    if (data) {
      var known = JSON.parse(data.textContent);
      offerModels(known, "a"); offerModels(known, "b");
    }
  });
})();
