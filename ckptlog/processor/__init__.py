"""The processor side of ckptlog: the pure fold (core), storage and deletion, the running service,
explanations and the console. The client library (ckptlog.client) never imports it."""
