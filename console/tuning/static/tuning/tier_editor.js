// Tier config form editor: fields per tier, built from the scheduler's JSON schema (embedded by
// the page), kept in step with the JSON textarea both ways. The JSON stays the document the
// server validates; the fields are a view of it.
// An empty box means the field's default, shown greyed in the box: an optional field is left
// out of the document (the schema's default applies); a field every tier must set gets the
// page's default for it (console/tuning/editor.py) written into the document.
(function () {
  "use strict";
  var schema, textarea, box, errorBox, defaults;

  function ref(node) {
    // Resolve {"$ref": "#/$defs/X"} and unwrap the object type of "anyOf [X, null]".
    if (node && node.$ref) { return schema.$defs[node.$ref.split("/").pop()]; }
    return node;
  }
  function typesOf(prop) {
    // A field's JSON types, through nested anyOf (pydantic writes "int | float | None" so).
    if (prop.anyOf) { return [].concat.apply([], prop.anyOf.map(typesOf)); }
    return [ref(prop).type];
  }
  function kindOf(prop) {
    var types = typesOf(prop);
    if (types.indexOf("boolean") >= 0) { return "boolean"; }
    if (types.indexOf("array") >= 0) { return "list"; }
    if (types.indexOf("integer") >= 0 || types.indexOf("number") >= 0) { return "number"; }
    return "text";
  }
  function section(name) {
    return ref(ref(schema.properties.scheduler).properties[name]);
  }
  function queueSchema() {
    return ref(section("queues").additionalProperties);
  }
  function read(input, kind) {
    var raw = input.value.trim();
    if (kind === "boolean") { return input.value === "" ? undefined : input.value === "true"; }
    if (raw === "") { return undefined; }
    if (kind === "number") { var n = Number(raw); return isNaN(n) ? raw : n; }
    if (kind === "list") {
      return raw.split(",").map(function (x) { var n = Number(x.trim()); return isNaN(n) ? x.trim() : n; });
    }
    return raw;
  }
  function show(value, kind) {
    if (value === undefined || value === null) { return ""; }
    if (kind === "list") { return value.join(", "); }
    return String(value);
  }
  function input(kind, value, onChange) {
    var el;
    if (kind === "boolean") {
      el = document.createElement("select");
      [["", "default"], ["true", "true"], ["false", "false"]].forEach(function (o) {
        var opt = document.createElement("option"); opt.value = o[0]; opt.textContent = o[1]; el.appendChild(opt);
      });
      el.value = value === undefined ? "" : String(value);
      el.addEventListener("change", onChange);
    } else {
      el = document.createElement("input");
      el.size = kind === "list" ? 18 : 8;
      el.value = show(value, kind);
      el.addEventListener("input", onChange);
    }
    return el;
  }
  function nextPriority(doc, tier) {
    var urgency = Object.keys(doc.scheduler.queues).filter(function (t) { return t !== tier; })
      .map(function (t) { return doc.scheduler.queues[t].priority || 0; });
    return (urgency.length ? Math.max.apply(null, urgency) : 0) + 1;
  }
  function queueDefault(doc, tier, field) {
    // The value an emptied box stands for; undefined: leave the field out (schema default).
    if (defaults.required.indexOf(field) < 0) { return undefined; }
    var seed = defaults.queues[tier];
    if (seed && seed[field] !== undefined) { return seed[field]; }
    if (field === "priority") { return nextPriority(doc, tier); }
    return defaults.new_tier[field];
  }
  function shownDefault(prop, value) {
    if (value !== undefined) { return String(value); }
    if (!prop || !("default" in prop)) { return ""; }
    return prop["default"] === null ? "none" : String(prop["default"]);
  }
  function hint(el, text) {
    if (!text) { return; }
    el.placeholder = text; el.title = "empty: the default, " + text;
    if (el.tagName === "SELECT") { el.options[0].textContent = "default (" + text + ")"; }
  }
  function describe(el, prop) {
    // The field's help: its schema description (scheduler/config.py), the same text as the
    // API's schema and docs/admission.md's reference table.
    var text = prop && prop.description;
    if (!text) { return; }
    var help = document.createElement("span");
    help.className = "field-help editor-help"; help.textContent = text;
    el.appendChild(help);
  }
  function write(doc) {
    textarea.value = JSON.stringify(doc, null, 2);
  }
  function set(obj, key, value) {
    if (value === undefined) { delete obj[key]; } else { obj[key] = value; }
  }
  function render() {
    var doc;
    try { doc = JSON.parse(textarea.value); } catch (e) {
      errorBox.hidden = false; errorBox.textContent = "The JSON above does not parse (" + e.message + "): fix it there to use the fields.";
      box.querySelectorAll("input, select").forEach(function (el) { el.disabled = true; });
      return;
    }
    if (!doc || typeof doc !== "object") { doc = {}; }
    doc.scheduler = doc.scheduler || {};
    doc.scheduler.queues = doc.scheduler.queues || {};
    errorBox.hidden = true;
    box.textContent = "";
    var tiers = Object.keys(doc.scheduler.queues);
    var props = queueSchema().properties;
    var table = document.createElement("table");
    table.className = "grid"; table.id = "tier-editor-queues";
    var head = table.createTHead().insertRow();
    head.insertCell().textContent = "field";
    tiers.forEach(function (tier) {
      var th = head.insertCell(); th.textContent = tier;
      var remove = document.createElement("button");
      remove.type = "button"; remove.textContent = "×"; remove.title = "Remove tier " + tier;
      remove.addEventListener("click", function () { delete doc.scheduler.queues[tier]; write(doc); render(); });
      th.appendChild(document.createTextNode(" ")); th.appendChild(remove);
    });
    Object.keys(props).forEach(function (field) {
      var row = table.insertRow(), kind = kindOf(props[field]);
      var name = row.insertCell();
      name.textContent = field; describe(name, props[field]);
      tiers.forEach(function (tier) {
        var el = input(kind, doc.scheduler.queues[tier][field], function () {
          var value = read(el, kind);
          if (value === undefined) { value = queueDefault(doc, tier, field); }
          set(doc.scheduler.queues[tier], field, value); write(doc);
        });
        el.name = "tier-editor." + tier + "." + field;
        hint(el, shownDefault(props[field], queueDefault(doc, tier, field)));
        row.insertCell().appendChild(el);
      });
    });
    box.appendChild(table);
    ["adaptive", "admission"].forEach(function (name) {
      var part = section(name);
      if (!part || !part.properties) { return; }
      var h = document.createElement("h3"); h.textContent = name; box.appendChild(h);
      var grid = document.createElement("div"); grid.className = "editor-section";
      Object.keys(part.properties).forEach(function (field) {
        var kind = kindOf(part.properties[field]);
        var current = (doc.scheduler[name] || {})[field];
        var label = document.createElement("label");
        label.textContent = field + " ";
        var el = input(kind, current, function () {
          doc.scheduler[name] = doc.scheduler[name] || {};
          set(doc.scheduler[name], field, read(el, kind));
          if (!Object.keys(doc.scheduler[name]).length) { delete doc.scheduler[name]; }
          write(doc);
        });
        el.name = "tier-editor." + name + "." + field;
        hint(el, shownDefault(part.properties[field]));
        label.appendChild(el); describe(label, part.properties[field]); grid.appendChild(label);
      });
      box.appendChild(grid);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var data = document.getElementById("tier-schema");
    textarea = document.querySelector("textarea[name=config]");
    if (!data || !textarea) { return; }
    schema = JSON.parse(data.textContent);
    defaults = JSON.parse(document.getElementById("tier-defaults").textContent);
    box = document.getElementById("tier-editor-fields");
    errorBox = document.getElementById("tier-editor-error");
    document.getElementById("tier-editor").hidden = false;
    textarea.addEventListener("input", render);
    document.getElementById("tier-editor-add").addEventListener("click", function () {
      var name = document.getElementById("tier-editor-new").value.trim();
      var doc;
      try { doc = JSON.parse(textarea.value); } catch (e) { return render(); }
      if (!name || doc.scheduler.queues[name]) { return; }
      var fresh = {};
      Object.keys(defaults.new_tier).forEach(function (f) { fresh[f] = defaults.new_tier[f]; });
      fresh.priority = nextPriority(doc, name);
      doc.scheduler.queues[name] = fresh;
      write(doc); render();
    });
    render();
  });
})();
