"""The benchmark harness: scripted server, worker protocol, runner and report (stdlib only)."""
