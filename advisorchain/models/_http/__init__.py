"""The HTTP stack of the provider adapters, under the skeleton they share (``models._base``):

* ``transport``: how a request's bytes travel — the SDK client's own stack, or aiohttp carrying
  exactly the SDK's request (its URL, headers, timeouts and retry policy);
* ``failures``: the one function that turns any failure (an error status and its body, a broken
  connection, a timeout, a body that is not what the API sends) into a typed ``ModelError``;
* ``sse``: server-sent events decoded from raw bytes;
* ``wire``: each message's request JSON serialized once and reused across rounds and turns;
* ``loops``: one SDK client (and connection pool) per event loop;
* ``internals``: every private attribute of the SDKs, httpx2 and aiohttp read here, and their check;
* ``json``: fast JSON in and out (orjson when installed).

Nothing here maps messages: a fourth provider brings its mapping and reuses all of this.
"""
