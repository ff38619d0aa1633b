// The assign page: the round select lists only the chosen dataset's rounds. The server marks
// every other dataset's rounds hidden and disabled; this follows the dataset select as it
// changes, so a round of another dataset can never be chosen by mistake.
(function () {
  "use strict";
  var dataset = document.getElementById("id_dataset");
  var study = document.getElementById("id_study");
  if (!dataset || !study) return;
  function follow() {
    var chosen = dataset.value;
    Array.prototype.forEach.call(study.options, function (option) {
      var of = option.getAttribute("data-dataset");
      if (of === null) return; // "the dataset's round": always offered
      var other = of !== chosen;
      option.hidden = other;
      option.disabled = other;
      if (other && option.selected) study.value = "";
    });
  }
  dataset.addEventListener("change", follow);
  follow();
})();
