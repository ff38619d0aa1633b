/* Tells the review pages of this browser that the session is back, then closes the window
 * that the review page opened for signing in. */
(function () {
  "use strict";
  if ("BroadcastChannel" in window) new BroadcastChannel("medalign-session").postMessage("signed-in");
  try { if (window.opener) window.opener.postMessage("medalign-signed-in", window.location.origin); } catch (e) { /* closed */ }
  var close = document.getElementById("close-window");
  if (close) close.addEventListener("click", function () { window.close(); });
  window.setTimeout(function () { window.close(); }, 1500);
})();
