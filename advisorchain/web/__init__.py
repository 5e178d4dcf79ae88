"""``advisorchain.web``: a local web page to build agents in (extra ``web``).

``create_app(client, memory=..., token=...)`` serves any ChatClient as a Starlette app: the
conversations of the memory, answers streamed live, each tool call as it runs, approve / deny for
calls that need approval (the run resumes), and per turn the tree of the run's spans (request →
advisors → tool-loop rounds → model calls → tool calls, with durations and tokens). The page is
plain HTML, CSS and JavaScript shipped in the package: no build step, nothing fetched from the
network. ``advisorchain web`` serves the agent ``advisorchain chat`` builds.
"""

from .app import create_app

__all__ = ["create_app"]
