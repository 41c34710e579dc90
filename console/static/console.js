// The bridge's console: the admin API in a browser tab.
//
// Rules this file keeps, and why:
// - Every value from the API reaches the page through textContent or
//   setAttribute, never as markup: a last error or a receiver's answer is
//   whatever a receiver chose to send.
// - The token lives in this tab's sessionStorage and in memory, never in
//   the browser's lasting storage, a cookie or a URL: it leaves with the
//   tab and is sent only in the Authorization header of /v1 calls.
// - Views poll the API every POLL_MS, so changes any client makes show
//   within a few seconds; each view's polling stops when it is left.
// - A button shows only when the signed-in token's role may use it
//   (GET /v1/whoami); the API still decides, and a refusal is shown.
'use strict';

import { attemptKey, drawHistory, failuresBar, lagBar, OUTCOMES } from './chart.js';

{
  const POLL_MS = 2500;
  const PAGE = 100;
  const ATTEMPTS = 50;
  // HISTORY is how many attempts the picture reads at most: an hour of a
  // registration retrying every second fits, and one page answers it.
  const HISTORY = 1000;
  const HOUR_MS = 60 * 60 * 1000;
  const TOKEN_KEY = 'bridge.console.token';
  // WHO_KEY keeps the answer of GET /v1/whoami beside the token, so a
  // reload need not ask again before the list: a token's name, role and
  // scope never change, and a revoked one is refused by the next call.
  const WHO_KEY = 'bridge.console.who';

  const $ = (id) => document.getElementById(id);

  function storedWho() {
    try {
      const who = JSON.parse(sessionStorage.getItem(WHO_KEY) || 'null');
      return who && typeof who.role === 'string' ? who : null;
    } catch (e) {
      return null;
    }
  }

  const ui = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    // gen numbers the current view; an answer for an older one is dropped.
    gen: 0,
    timer: 0,
    // typing delays a list read until the id filter stops changing.
    typing: 0,
    // afters holds the after token of every list page visited; the last
    // one is the page shown.
    afters: [''],
    next: '',
    // shown is the id of the registration's page on screen.
    shown: '',
    notice: '',
    // who is the signed-in token as GET /v1/whoami answers it: name, role
    // (root, operator or viewer) and idPrefix; null until known.
    who: storedWho(),
    // history is the attempts of the registration shown over the last
    // hour, newest first, kept between polls so each poll reads only
    // what is new.
    history: { id: '', attempts: [] },
  };

  // APIError is a refused call: its HTTP status (0 when none came), the
  // status's text and the API's error.message.
  class APIError extends Error {
    constructor(status, message, statusText) {
      super(message);
      this.status = status;
      this.statusText = statusText || '';
    }
  }

  // api calls the admin API with the token and answers {status, statusText,
  // data}. A 401 signs out, showing the API's message on the sign-in form.
  async function api(method, path, body) {
    const init = {
      method,
      headers: { Authorization: 'Bearer ' + ui.token },
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, 'the bridge did not answer (' + e.message + ')');
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const message = (data && data.error && data.error.message) || text || res.statusText;
      if (res.status === 401) {
        signOut(message);
      }
      throw new APIError(res.status, message, res.statusText);
    }
    return { status: res.status, statusText: res.statusText, data };
  }

  // el builds an element whose content is text, never markup.
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) {
      e.textContent = String(text);
    }
    if (cls) {
      e.className = cls;
    }
    return e;
  }

  function show(id, on) {
    $(id).hidden = !on;
  }

  function showOnly(section) {
    for (const id of ['signin', 'list', 'registration']) {
      show(id, id === section);
    }
    show('signout', section !== 'signin');
  }

  // stopPolling ends the current view's reads, and a read the id filter
  // would have started: it would show the list over a page left since.
  function stopPolling() {
    ui.gen++;
    clearTimeout(ui.timer);
    clearTimeout(ui.typing);
  }

  // poll runs refresh now and again POLL_MS after each answer, until the
  // view changes. refresh gets the view's number and must not touch the
  // page once it is no longer current.
  function poll(refresh, onError) {
    stopPolling();
    const gen = ui.gen;
    const tick = async () => {
      try {
        await refresh(gen);
      } catch (e) {
        if (gen === ui.gen) {
          onError(e);
        }
      }
      if (gen === ui.gen) {
        ui.timer = setTimeout(tick, POLL_MS);
      }
    };
    tick();
  }

  // Sign-in.

  function signOut(message) {
    stopPolling();
    ui.token = '';
    ui.who = null;
    ui.history = { id: '', attempts: [] };
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(WHO_KEY);
    showIdentity();
    for (const id of ['parked', 'rest', 'attempts']) {
      $(id).tBodies[0].replaceChildren();
    }
    $('reg-config').replaceChildren();
    const err = $('signin-error');
    err.textContent = message || '';
    err.hidden = !message;
    show('notice', false);
    showOnly('signin');
    $('token').value = '';
    $('token').focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const token = $('token').value.trim();
    if (!token) {
      return;
    }
    ui.token = token;
    try {
      await identify();
    } catch (e) {
      if (e.status !== 401) {
        ui.token = '';
        const err = $('signin-error');
        err.textContent = e.message;
        err.hidden = false;
      }
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token').value = '';
    show('signin-error', false);
    route();
  }

  // Routing: #/ is the list, #/r/<id> a registration's page, so Back
  // returns from one to the other.

  // identify asks the API which token is signed in: its name, role and
  // scope, never the token.
  async function identify() {
    ui.who = (await api('GET', '/v1/whoami')).data;
    sessionStorage.setItem(WHO_KEY, JSON.stringify(ui.who));
    showIdentity();
  }

  // canWrite says whether the signed-in role may change registrations:
  // root and operator may, a viewer only reads.
  function canWrite() {
    return !!ui.who && (ui.who.role === 'root' || ui.who.role === 'operator');
  }

  // showIdentity says which token is signed in (never the token): its
  // name, role and the ids it reaches.
  function showIdentity() {
    const who = ui.who;
    show('identity', !!who);
    if (!who) {
      return;
    }
    const scope = who.idPrefix ? 'ids beginning ' + who.idPrefix : 'every registration';
    $('who-name').textContent = who.name;
    $('who-role').textContent = who.role;
    $('who-scope').textContent = scope;
    const expires = who.expiresAt ? 'until ' + new Date(who.expiresAt).toLocaleString() : '';
    $('who-expires').textContent = expires;
    show('who-expires', !!expires);
    $('parked-hint').textContent = canWrite()
      ? 'Stopped delivering: unpark, rewind or delete them.'
      : 'Stopped delivering: a token with the operator role can unpark, rewind or delete them.';
    $('identity').setAttribute('data-role', who.role);
    $('identity').setAttribute('data-prefix', who.idPrefix || '');
  }

  async function route() {
    stopPolling();
    if (!ui.token) {
      signOut('');
      return;
    }
    if (!ui.who) {
      try {
        await identify();
      } catch (e) {
        if (e.status !== 401) { // a 401 has signed out already
          status('list-status', e.message, true);
          showOnly('list');
        }
        return;
      }
    }
    showIdentity();
    const m = /^#\/r\/(.+)$/.exec(location.hash);
    let id = null;
    if (m) {
      try {
        id = decodeURIComponent(m[1]);
      } catch (e) {
        id = null;
      }
    }
    showNotice();
    if (id === null) {
      showList();
    } else {
      showRegistration(id);
    }
  }

  function registrationHash(id) {
    return '#/r/' + encodeURIComponent(id);
  }

  function showNotice() {
    const n = $('notice');
    n.textContent = ui.notice;
    n.hidden = !ui.notice;
    ui.notice = '';
  }

  // The list.

  const listColumns = [
    { name: 'id', cell: (r) => {
      const a = el('a', r.id);
      a.setAttribute('href', registrationHash(r.id));
      return a;
    } },
    { name: 'namespace', cell: (r) => r.namespace },
    { name: 'state', cell: (r) => stateWord(r.state) },
    { name: 'lag', cell: (r) => withBar(r.lag, lagBar), cls: 'num glance-cell',
      title: 'messages behind the stream\'s last; the bar grows with its logarithm, full at a million' },
    { name: 'attempts', cell: (r) => withBar(r.attempts, failuresBar), cls: 'num glance-cell',
      title: 'failed attempts in a row; the bar grows with their logarithm, full at 100' },
    { name: 'delivered', cell: (r) => r.delivered, cls: 'num' },
    { name: 'last error', cell: (r) => r.lastError, cls: 'text' },
    { name: 'owner', cell: (r) => ownerOf(r), kv: true },
  ];

  const attemptColumns = [
    { name: 'at', cell: (a) => a.at, cls: 'time' },
    { name: 'seq', cell: (a) => a.seq, cls: 'num' },
    { name: 'attempt', cell: (a) => a.attempt, cls: 'num' },
    { name: 'trigger', cell: (a) => a.trigger },
    { name: 'outcome', cell: (a) => a.outcome },
    { name: 'status', cell: (a) => a.status, cls: 'num' },
    { name: 'ms', cell: (a) => a.durationMs, cls: 'num' },
    { name: 'error', cell: (a) => a.error, cls: 'text' },
    { name: 'response', cell: (a) => a.response, cls: 'text response' },
  ];

  // withBar is a number and its glance bar, which holds no text: the
  // cell reads as the number alone.
  function withBar(value, bar) {
    const both = el('span', null, 'with-bar');
    both.append(el('span', value), bar(value));
    return both;
  }

  function stateWord(state) {
    const s = el('span', state, 'state');
    if (['active', 'parked', 'completed'].includes(state)) {
      s.classList.add('state-' + state);
    }
    return s;
  }

  // ownerOf is the bridge delivering a registration, with several bridges
  // on one store; the API leaves owner out for a bridge alone.
  function ownerOf(r) {
    return r.owner === '' ? '(none)' : r.owner;
  }

  // fill replaces a table's head and rows. Each cell carries its column's
  // name for the narrow layout, which shows rows as cards.
  function fill(table, columns, rows) {
    const head = document.createElement('tr');
    for (const c of columns) {
      const th = el('th', c.name, c.cls);
      if (c.title) {
        th.setAttribute('title', c.title);
      }
      head.append(th);
    }
    table.tHead.replaceChildren(head);
    table.tBodies[0].replaceChildren(...rows.map((r) => {
      const tr = document.createElement('tr');
      for (const c of columns) {
        const v = c.cell(r);
        const td = v instanceof Node ? el('td') : el('td', v);
        if (v instanceof Node) {
          td.append(v);
        }
        td.setAttribute('data-label', c.name);
        if (c.cls) {
          td.className = c.cls;
        }
        tr.append(td);
      }
      return tr;
    }));
  }

  function filters() {
    return {
      state: $('filter-state').value,
      namespace: $('filter-namespace').value,
      prefix: $('filter-id').value.trim(),
    };
  }

  function listPath(f, state, after) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (state) {
      q.set('state', state);
    }
    if (f.namespace) {
      q.set('namespace', f.namespace);
    }
    if (f.prefix) {
      q.set('prefix', f.prefix);
    }
    if (after) {
      q.set('after', after);
    }
    return '/v1/registrations?' + q.toString();
  }

  function showList() {
    showOnly('list');
    poll(refreshList, (e) => {
      status('list-status', e.message, true);
      if (e.status === 400) { // a filter the API refused: what is shown no longer matches it
        for (const id of ['parked', 'rest']) {
          $(id).tBodies[0].replaceChildren();
        }
      }
    });
  }

  // refreshList shows the parked registrations first, then the page of
  // all the others; with a state chosen, only that state's page.
  async function refreshList(gen) {
    const f = filters();
    const both = f.state === '';
    const after = ui.afters[ui.afters.length - 1];
    const [parked, page] = await Promise.all([
      both ? api('GET', listPath(f, 'parked', '')) : null,
      api('GET', listPath(f, f.state, after)),
    ]);
    if (gen !== ui.gen) {
      return;
    }
    const columnsFor = (rows) => listColumns.filter((c) => !c.kv || rows.some((r) => 'owner' in r));
    show('parked-part', both);
    if (both) {
      const rows = parked.data.registrations;
      fill($('parked'), columnsFor(rows), rows);
      show('parked-empty', rows.length === 0);
      show('parked-more', parked.data.next !== '');
    }
    let rows = page.data.registrations;
    if (both) {
      rows = rows.filter((r) => r.state !== 'parked');
    }
    fill($('rest'), columnsFor(rows), rows);
    $('rest-title').textContent = both ? 'Not parked' : 'Registrations: ' + f.state;
    show('rest-empty', rows.length === 0);
    ui.next = page.data.next;
    $('next').disabled = ui.next === '';
    $('previous').disabled = ui.afters.length === 1;
    $('page-number').textContent = 'page ' + ui.afters.length;
    status('list-status', 'Updated ' + new Date().toLocaleTimeString(), false);
  }

  function status(id, text, isError) {
    const s = $(id);
    s.textContent = text;
    s.classList.toggle('error', isError);
  }

  function filtersChanged() {
    ui.afters = [''];
    showList();
  }

  // A registration's page.

  const configOrder = ['id', 'namespace', 'state', 'subject', 'taskId', 'url', 'format',
    'dataContentType', 'batch', 'ordering', 'filter', 'signed', 'hasToken', 'authentication', 'nextSeq', 'lag',
    'inFlight', 'ahead', 'attempts', 'delivered', 'filtered', 'filterErrors', 'lastFilterError',
    'nextAttemptAt', 'lastError', 'createdAt', 'updatedAt',
    'completedAt', 'owner'];

  function showRegistration(id) {
    showOnly('registration');
    $('reg-title').textContent = id;
    show('actions-part', canWrite());
    show('read-only', !canWrite());
    show('answer', false);
    show('reg-body', false);
    $('reg-config').replaceChildren();
    $('attempts').tBodies[0].replaceChildren();
    status('reg-status', 'Loading…', false);
    ui.shown = id;
    pollRegistration(id);
  }

  function pollRegistration(id) {
    poll((gen) => refreshRegistration(id, gen), (e) => {
      status('reg-status', e.status === 404 ? 'Registration ' + id + ' does not exist (any more).' : e.message, true);
      show('reg-body', e.status !== 404 && $('reg-config').childElementCount > 0);
    });
  }

  async function refreshRegistration(id, gen) {
    const path = '/v1/registrations/' + encodeURIComponent(id);
    const [reg, attempts] = await Promise.all([
      api('GET', path),
      api('GET', path + '/attempts?limit=' + ATTEMPTS),
    ]);
    const history = await readHistory(id, path, attempts.data.attempts);
    if (gen !== ui.gen) {
      return;
    }
    renderConfig(reg.data);
    const rows = attempts.data.attempts;
    fill($('attempts'), attemptColumns, rows);
    show('attempts-empty', rows.length === 0);
    renderHistory(history, reg.data);
    show('reg-body', true);
    status('reg-status', 'Updated ' + new Date().toLocaleTimeString(), false);
  }

  // readHistory answers the registration's attempts of the last hour,
  // newest first, at most HISTORY. newest is the page just read; only
  // when it does not reach the attempts already kept is the log read
  // again from the top.
  async function readHistory(id, path, newest) {
    const kept = ui.history.id === id ? ui.history.attempts : [];
    const known = kept.length ? attemptKey(kept[0]) : '';
    const at = newest.findIndex((a) => attemptKey(a) === known);
    let all;
    if (known && at >= 0) {
      all = newest.slice(0, at).concat(kept);
    } else if (newest.length < ATTEMPTS) {
      all = newest; // the whole log of this registration
    } else {
      all = (await api('GET', path + '/attempts?limit=' + HISTORY)).data.attempts;
    }
    const since = Date.now() - HOUR_MS;
    all = all.filter((a) => Date.parse(a.at) >= since).slice(0, HISTORY);
    ui.history = { id, attempts: all };
    return all;
  }

  // renderHistory draws the last hour's attempts and delay, and its
  // legend: each outcome's colour and count, and what the delay is.
  function renderHistory(attempts, reg) {
    const drawn = drawHistory($('history'), attempts, Date.now());
    const counts = new Map();
    for (const a of attempts) {
      if (Date.parse(a.at) >= drawn.from) {
        counts.set(a.outcome, (counts.get(a.outcome) || 0) + 1);
      }
    }
    const known = OUTCOMES.filter((o) => counts.has(o));
    const other = [...counts.keys()].filter((o) => !OUTCOMES.includes(o));
    $('history-legend').replaceChildren(...known.concat(other).map((o) => {
      const item = el('li');
      item.append(el('span', '', 'swatch outcome-' + (OUTCOMES.includes(o) ? o : 'other')), el('span', o + ' ' + counts.get(o)));
      return item;
    }));
    show('history-empty', counts.size === 0);
    const span = drawn.to - drawn.from;
    const minutes = Math.round(span / 60000);
    $('history-span').textContent = span >= HOUR_MS - 1000
      ? 'The last hour'
      : 'The last ' + (minutes < 2 ? Math.round(span / 1000) + ' seconds' : minutes + ' minutes') + ' (no attempt in the hour before them)';
    const capped = attempts.length >= HISTORY ? ' (the newest ' + HISTORY + ' attempts)' : '';
    $('history-count').textContent = capped;
    $('history-lag').textContent = 'Now: ' + reg.lag + (reg.lag === 1 ? ' message' : ' messages') +
      ' behind the stream\'s last (lag); ' + reg.attempts + (reg.attempts === 1 ? ' attempt' : ' attempts') + ' in a row failed.';
  }

  // orderingOf says what a registration keeps in order and how many of
  // its POSTs may be in flight: with the key registration, one at a time
  // whatever maxInFlight says.
  function orderingOf(o) {
    if (o.key === 'registration') {
      return 'registration, one POST at a time';
    }
    return o.key + ', up to ' + o.maxInFlight + ' in flight';
  }

  // renderConfig lists every member the API answered, known ones first;
  // the API never answers a secret, so neither can this.
  function renderConfig(r) {
    const keys = configOrder.filter((k) => k in r).concat(Object.keys(r).filter((k) => !configOrder.includes(k)));
    const items = [];
    for (const k of keys) {
      const v = r[k];
      let dd;
      if (k === 'state') {
        dd = el('dd');
        dd.append(stateWord(v));
      } else if (k === 'owner') {
        dd = el('dd', ownerOf(r));
      } else if (k === 'ordering' && v !== null && typeof v === 'object') {
        dd = el('dd', orderingOf(v), 'text');
      } else if (v !== null && typeof v === 'object') {
        dd = el('dd', JSON.stringify(v), 'text');
      } else {
        dd = el('dd', v === null ? '—' : v, 'text');
      }
      items.push(el('dt', k), dd);
    }
    $('reg-config').replaceChildren(...items);
  }

  // act asks the browser to confirm, calls the API and shows its answer:
  // the HTTP status and, for an error, the API's message.
  async function act(label, question, method, path, body, describe) {
    if (!window.confirm(question)) {
      return null;
    }
    const answer = $('answer');
    answer.hidden = false;
    answer.classList.remove('error');
    answer.textContent = label + ': …';
    let res;
    try {
      res = await api(method, path, body);
    } catch (e) {
      const status = e.status ? (e.status + ' ' + e.statusText).trim() : 'no answer';
      answer.textContent = label + ': ' + status + ' — ' + e.message;
      answer.classList.add('error');
      return null;
    }
    const detail = describe ? describe(res.data) : '';
    answer.textContent = label + ': ' + res.status + ' ' + res.statusText + (detail ? ' — ' + detail : '');
    return res;
  }

  function registrationPath(suffix) {
    return '/v1/registrations/' + encodeURIComponent(ui.shown) + suffix;
  }

  // refreshShown reads the registration again at once after an action.
  function refreshShown() {
    if (!$('registration').hidden) {
      pollRegistration(ui.shown);
    }
  }

  function sequence(input) {
    const v = $(input).value.trim();
    return /^[0-9]+$/.test(v) ? Number(v) : null;
  }

  function refuse(text) {
    const answer = $('answer');
    answer.hidden = false;
    answer.classList.add('error');
    answer.textContent = text;
  }

  async function unpark() {
    await act('Unpark', 'Unpark ' + ui.shown + '? It delivers again from its cursor.', 'POST', registrationPath('/unpark'),
      undefined, (r) => 'now ' + r.state);
    refreshShown();
  }

  async function rewind() {
    const raw = $('rewind-seq').value.trim();
    const time = $('rewind-time').value.trim();
    const seq = sequence('rewind-seq');
    if ((raw === '') === (time === '') || (raw !== '' && seq === null)) {
      refuse('Rewind: give either a sequence (a whole number) or a time (RFC 3339, e.g. 2026-03-01T12:00:00Z).');
      return;
    }
    const body = raw !== '' ? { seq } : { time };
    const to = raw !== '' ? 'sequence ' + seq : time;
    await act('Rewind', 'Rewind ' + ui.shown + ' to ' + to + '? It delivers again from there.', 'POST', registrationPath('/rewind'),
      body, (r) => 'next sequence ' + r.nextSeq);
    refreshShown();
  }

  async function resend() {
    const seq = sequence('resend-seq');
    if (seq === null) {
      refuse('Resend: give the sequence to send (a whole number).');
      return;
    }
    await act('Resend', 'Resend message ' + seq + ' to ' + ui.shown + '?', 'POST', registrationPath('/resend'),
      { seq }, describeResend);
    refreshShown();
  }

  function describeResend(data) {
    const list = data && data.attempts ? data.attempts : [data];
    return list.map((a) => 'the receiver: ' + a.outcome + (a.status ? ' ' + a.status : '') + (a.error ? ', ' + a.error : '')).join('; ');
  }

  async function remove() {
    const id = ui.shown;
    const res = await act('Delete', 'Delete ' + id + '? Its cursor and configuration are gone for good.', 'DELETE', registrationPath(''));
    if (res) {
      ui.notice = 'Delete ' + id + ': ' + res.status + ' ' + res.statusText;
      location.hash = '#/';
    }
  }

  function start() {
    $('signin-form').addEventListener('submit', signIn);
    $('signout').addEventListener('click', () => {
      // The next token signed in starts at the list, not on a page the
      // last one opened.
      history.replaceState(null, '', location.pathname + location.search);
      signOut('');
    });
    $('filters').addEventListener('submit', (e) => e.preventDefault());
    $('filter-state').addEventListener('change', filtersChanged);
    $('filter-namespace').addEventListener('change', filtersChanged);
    $('filter-id').addEventListener('input', () => {
      clearTimeout(ui.typing);
      ui.typing = setTimeout(filtersChanged, 250);
    });
    $('next').addEventListener('click', () => {
      if (ui.next) {
        ui.afters.push(ui.next);
        showList();
      }
    });
    $('previous').addEventListener('click', () => {
      if (ui.afters.length > 1) {
        ui.afters.pop();
        showList();
      }
    });
    $('unpark').addEventListener('click', unpark);
    $('rewind').addEventListener('click', rewind);
    $('resend').addEventListener('click', resend);
    $('delete').addEventListener('click', remove);
    window.addEventListener('hashchange', route);
    route();
  }

  start();
}
