/* MedAlign Review: the site menu. On a phone it folds behind the Menu button so that the page
 * starts near the top; the dropdowns (Research, your account) close on a click elsewhere or
 * Escape. Without this script the menu is simply shown in full. */
(function () {
  "use strict";
  var header = document.querySelector(".topbar");
  var toggle = document.getElementById("menu-toggle");
  var nav = document.getElementById("site-nav");
  if (!header || !toggle || !nav) return;
  header.classList.add("collapsible");
  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    var open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    header.classList.toggle("open", open);
  });
  var menus = Array.prototype.slice.call(nav.querySelectorAll("details.menu"));
  menus.forEach(function (menu) {
    menu.addEventListener("toggle", function () {
      if (menu.open) menus.forEach(function (other) { if (other !== menu) other.open = false; });
    });
  });
  document.addEventListener("click", function (event) {
    menus.forEach(function (menu) { if (menu.open && !menu.contains(event.target)) menu.open = false; });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    menus.forEach(function (menu) {
      if (!menu.open) return;
      var inside = menu.contains(document.activeElement);
      menu.open = false;
      if (inside) menu.querySelector("summary").focus();
    });
  });
})();
