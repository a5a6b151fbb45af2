/* fll explorer: the access token of a server started with `fll serve --token`.
 *
 * Loaded before explorer.js; defines window.fllFetch, a fetch that sends
 * "Authorization: Bearer <token>". The token comes from the URL fragment
 * (open /#token=... once: it is moved to sessionStorage and removed from the
 * address bar, so "Copy link" and the history never carry it) or, on the first
 * 401, from a prompt. sessionStorage keeps it for this tab only, until the tab
 * closes. This file must never put the token in a URL, a log or localStorage.
 */
(function () {
  "use strict";
  const KEY = "fll.token";

  function takeFromFragment() {
    const hash = location.hash.replace(/^#/, "");
    if (!hash) return;
    const params = new URLSearchParams(hash);
    if (!params.has("token")) return;
    const token = (params.get("token") || "").trim();
    params.delete("token");
    if (token) sessionStorage.setItem(KEY, token);
    const rest = params.toString().replace(/\+/g, "%20");  // the explorer writes spaces so
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  takeFromFragment();
  // registered before explorer.js's listener, so the explorer never sees the token
  window.addEventListener("hashchange", takeFromFragment);

  let asking = null;  // one prompt however many requests were refused at once
  function ask(refused) {
    if (!asking) {
      asking = new Promise((resolve) => setTimeout(() => {
        const answer = window.prompt(refused
          ? "The fll server refused that token. Access token:"
          : "This fll server needs an access token (fll serve --token):");
        const token = (answer || "").trim();
        if (token) sessionStorage.setItem(KEY, token);
        asking = null;
        resolve(Boolean(token));
      }, 0));
    }
    return asking;
  }

  async function fllFetch(url, init) {
    const options = init || {};
    for (let attempt = 0; ; attempt++) {
      const headers = new Headers(options.headers || {});
      const token = sessionStorage.getItem(KEY);
      if (token) headers.set("Authorization", "Bearer " + token);
      const resp = await fetch(url, { ...options, headers });
      if (resp.status !== 401 || attempt >= 3) return resp;
      // another request may have got the token meanwhile: retry with it before asking
      if (sessionStorage.getItem(KEY) !== token) continue;
      if (!(await ask(Boolean(token)))) return resp;
    }
  }

  window.fllFetch = fllFetch;
})();
