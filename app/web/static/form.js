/*
 * Intake's hosted form, enhanced: each field is checked when it is left, the form is checked
 * when it is sent, and it is sent to the JSON API with fetch, without reloading the page.
 *
 * Without this script the form works as it is: it posts to its own page, which answers with the
 * thank-you page or the form again with the server's errors. With it, the checks here are only
 * the browser's own (required, type, maxlength, as the server rendered them); what is valid is
 * decided by the server, whose 422 messages are shown next to their fields.
 */
(function () {
  "use strict";

  var form = document.querySelector("form[data-intake-form]");
  if (!form || !window.fetch || !window.JSON) return;

  var summary = document.getElementById("error-summary");
  var status = document.getElementById("form-status");
  var button = form.querySelector("button[type=submit]");

  // Our messages replace the browser's bubbles.
  form.noValidate = true;

  function inputs() {
    return Array.prototype.slice.call(form.querySelectorAll("[data-field]"));
  }

  function inputNamed(name) {
    return inputs().filter(function (input) { return input.name === name; })[0] || null;
  }

  function setError(input, message) {
    var box = document.getElementById(input.id + "-error");
    var hint = document.getElementById(input.id + "-hint");
    box.textContent = message || "";
    box.hidden = !message;
    var described = [];
    if (hint) described.push(hint.id);
    if (message) described.push(box.id);
    if (described.length) input.setAttribute("aria-describedby", described.join(" "));
    else input.removeAttribute("aria-describedby");
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
    input.closest(".field").classList.toggle("has-error", !!message);
  }

  function errorOf(input) {
    return document.getElementById(input.id + "-error").textContent;
  }

  function valueOf(input) {
    return input.type === "checkbox" ? String(input.checked) : input.value;
  }

  // The browser's constraint validation, from the attributes the server rendered; and while a
  // field still holds the very value the server refused, the server's message stands.
  function check(input) {
    var message = input.validity.valid ? "" : input.validationMessage;
    if (!message && input.dataset.rejected === valueOf(input)) message = errorOf(input);
    setError(input, message);
    return !message;
  }

  function titled(input) {
    var message = errorOf(input);
    return message.indexOf(input.dataset.title) === 0 ? message : input.dataset.title + ": " + message;
  }

  function showSummary(items) {
    var list = summary.querySelector("ul");
    while (list.firstChild) list.removeChild(list.firstChild);
    items.forEach(function (item) {
      var li = document.createElement("li");
      if (item.input) {
        var link = document.createElement("a");
        link.href = "#" + item.input.id;
        link.textContent = item.text;
        link.addEventListener("click", function (event) {
          event.preventDefault();
          item.input.focus();
        });
        li.appendChild(link);
      } else {
        li.textContent = item.text;
      }
      list.appendChild(li);
    });
    summary.hidden = items.length === 0;
    if (items.length) summary.focus();
  }

  function say(text, isError) {
    status.textContent = text || "";
    status.classList.toggle("is-error", !!isError);
  }

  // What the form means as JSON: the same reading the server applies to a plain POST
  // (app/web/formdata.py): empty is missing; an unchecked box is false, or missing if required.
  function collect() {
    var data = {};
    inputs().forEach(function (input) {
      if (input.type === "checkbox") {
        if (input.checked) data[input.name] = true;
        else if (!input.required) data[input.name] = false;
      } else if (input.value.trim() !== "") {
        data[input.name] = input.value;
      }
    });
    return data;
  }

  function replaceMain(templateId, reference) {
    var content = document.getElementById(templateId).content.cloneNode(true);
    var main = document.getElementById("main");
    var ref = content.querySelector("[data-reference]");
    if (ref && reference) {
      ref.querySelector("[data-reference-value]").textContent = reference;
      ref.hidden = false;
    }
    while (main.firstChild) main.removeChild(main.firstChild);
    main.appendChild(content);
    var heading = main.querySelector("[data-focus]");
    if (heading) {
      document.title = heading.textContent;
      heading.focus();
    }
  }

  function thank(reference) {
    replaceMain("thanks-template", reference);
    var url = form.dataset.thanks + (reference ? "?ref=" + encodeURIComponent(reference) : "");
    // The address of the thank-you page: reloading it shows the thanks, not an empty form.
    history.replaceState(null, "", url);
  }

  function showServerErrors(detail) {
    inputs().forEach(function (input) {
      delete input.dataset.rejected;
      setError(input, "");
    });
    var items = detail.map(function (problem) {
      var loc = problem.loc || [];
      var input = loc[1] === "data" && loc.length > 2 ? inputNamed(String(loc[2])) : null;
      if (input) {
        input.dataset.rejected = valueOf(input);
        setError(input, problem.msg);
      }
      return { input: input, text: problem.msg };
    });
    showSummary(items);
  }

  var FAILURES = {
    404: "This form no longer exists.",
    413: "Your answers are too long to send. Shorten them and try again.",
    429: "Too many forms were sent from here just now. Wait a minute and send it again.",
    503: "We could not confirm that your answers were saved. Please send the form again in a moment: it will not be saved twice."
  };

  function handle(code, body) {
    if (code === 201 || code === 200) return thank(body && body.id);
    if (code === 422 && body && Array.isArray(body.detail)) {
      say("");
      return showServerErrors(body.detail);
    }
    if (code === 409) return replaceMain("closed-template");
    say(FAILURES[code] || "Something went wrong and we could not confirm that your answers were saved. Please send the form again: it will not be saved twice.", true);
  }

  function send() {
    button.disabled = true;
    form.setAttribute("aria-busy", "true");
    say("Sending…");
    var headers = { "Content-Type": "application/json", "Accept": "application/json" };
    if (form.dataset.idempotencyKey) headers["Idempotency-Key"] = form.dataset.idempotencyKey;
    fetch(form.dataset.api, {
      method: "POST",
      headers: headers,
      body: JSON.stringify({ data: collect() }),
      credentials: "same-origin"
    }).then(function (response) {
      return response.json().catch(function () { return null; }).then(function (body) {
        handle(response.status, body);
      });
    }).catch(function () {
      say("We could not reach the server. Check your connection and send the form again.", true);
    }).then(function () {
      button.disabled = false;
      form.removeAttribute("aria-busy");
    });
  }

  inputs().forEach(function (input) {
    // Errors the server rendered (a POST sent before this script ran) count as its verdicts.
    if (input.getAttribute("aria-invalid") === "true") input.dataset.rejected = valueOf(input);
    var leave = input.type === "checkbox" ? "change" : "blur";
    input.addEventListener(leave, function () { check(input); });
    // Once a field shows an error, the error goes as soon as the value is right.
    input.addEventListener("input", function () {
      if (input.getAttribute("aria-invalid") === "true") check(input);
    });
  });

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (button.disabled) return;
    var bad = inputs().filter(function (input) { return !check(input); });
    if (bad.length) {
      say("");
      showSummary(bad.map(function (input) {
        return { input: input, text: titled(input) };
      }));
      return;
    }
    showSummary([]);
    send();
  });
})();
