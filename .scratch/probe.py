import json, httpx2
from nous_tools import Registry, Tool
from nous_tools.contrib.mcp import serve_http_in_thread

def region_echo(region: str, q: str = "") -> str:
    return f"{region}:{q}"

schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "q": {"type": "string"}}, "required": ["region"]}
reg = Registry([Tool(name="region_echo", function=region_echo, parameters=schema, timeout=5)])
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
with serve_http_in_thread(reg) as running:
    def post(method, params, headers=None):
        h = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if method == "tools/call": h["Mcp-Name"] = params["name"]
        h.update(headers or {})
        r = httpx2.post(running.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}, headers=h, timeout=10)
        return r.status_code, r.text[:500]
    print(post("server/discover", {}))
    print(post("tools/list", {}))
    print(post("tools/call", {"name": "region_echo", "arguments": {"region": "eu"}}, {"Mcp-Param-Region": "eu"}))
    print(post("tools/call", {"name": "region_echo", "arguments": {"region": "eu"}}, {"Mcp-Param-Region": "us"}))
    print(post("tools/call", {"name": "region_echo", "arguments": {"region": "eu"}}))
