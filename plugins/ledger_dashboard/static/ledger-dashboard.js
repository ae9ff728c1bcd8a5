/* agent-ledger dashboard: draws the page's charts, copies vendor map entries, tidies filter
   links. No HTML is built here: chart labels are drawn on a canvas, and copied text is read
   with textContent. */
(function () {
  "use strict";

  function stopLine(index) {
    return {
      id: "ledgerStop",
      afterDatasetsDraw: function (chart) {
        var x = chart.scales.x.getPixelForValue(index);
        var area = chart.chartArea;
        var ctx = chart.ctx;
        ctx.save();
        ctx.strokeStyle = "#c62828";
        ctx.fillStyle = "#c62828";
        ctx.lineWidth = 2;
        ctx.setLineDash([5, 3]);
        ctx.beginPath();
        ctx.moveTo(x, area.top);
        ctx.lineTo(x, area.bottom);
        ctx.stroke();
        var label = "stop";
        var room = area.right - x > ctx.measureText(label).width + 8;
        ctx.textAlign = room ? "left" : "right";
        ctx.fillText(label, room ? x + 4 : x - 4, area.top + 10);
        ctx.restore();
      }
    };
  }

  function follow(links) {
    return function (event, elements) {
      if (!elements.length) {
        return;
      }
      var row = links[elements[0].datasetIndex] || [];
      var url = row[elements[0].index];
      /* Only our own paths: never a scheme that could come from ledger text. */
      if (typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/") {
        window.location.href = url;
      }
    };
  }

  function drawCharts() {
    var holder = document.getElementById("ledger-charts");
    if (!holder || typeof window.Chart === "undefined") {
      return;
    }
    var specs = JSON.parse(holder.textContent);
    var canvases = document.querySelectorAll("canvas[data-ledger-chart]");
    Array.prototype.forEach.call(canvases, function (canvas) {
      var spec = specs[canvas.getAttribute("data-ledger-chart")];
      if (!spec) {
        return;
      }
      var config = {type: spec.type, data: spec.data, options: spec.options || {}, plugins: []};
      if (spec.links) {
        config.options.onClick = follow(spec.links);
        config.options.onHover = function (event, elements) {
          event.native.target.style.cursor = elements.length ? "pointer" : "default";
        };
      }
      if (typeof spec.stopIndex === "number") {
        config.plugins.push(stopLine(spec.stopIndex));
      }
      canvas.ledgerChart = new window.Chart(canvas, config);
      canvas.setAttribute("data-drawn", "true");
    });
  }

  function copyButtons() {
    var buttons = document.querySelectorAll("button[data-ledger-copy]");
    Array.prototype.forEach.call(buttons, function (button) {
      button.addEventListener("click", function () {
        var source = document.getElementById(button.getAttribute("data-ledger-copy"));
        if (!source) {
          return;
        }
        var done = function () { button.textContent = "Copied"; };
        var select = function () {
          var range = document.createRange();
          range.selectNodeContents(source);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          button.textContent = "Selected: press Ctrl+C";
        };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(source.textContent).then(done, select);
        } else {
          select();
        }
      });
    });
  }

  /* Empty fields stay out of the URL, so a shared link holds only the filters in use. */
  function tidyForms() {
    var forms = document.querySelectorAll("form.ledger-filters");
    Array.prototype.forEach.call(forms, function (form) {
      form.addEventListener("submit", function () {
        Array.prototype.forEach.call(form.elements, function (field) {
          if (field.name && !field.value) {
            field.disabled = true;
          }
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawCharts();
    copyButtons();
    tidyForms();
  });
})();
