"""An LLM agent's MCP session against `livestate mcp`, with the official MCP Python SDK.

Usage: mcp_agent.py LIVESTATE_BINARY URL AGENT_TOKEN
Prints one JSON object with what each step returned; the Rust test checks it.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(binary, url, token):
    params = StdioServerParameters(command=binary, args=["mcp", "--url", url, "--token", token])
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)

            resources = await session.list_resources()
            out["resources"] = sorted(str(r.uri) for r in resources.resources)
            schema = await session.read_resource("livestate://tables/stock")
            out["stock_schema"] = json.loads(schema.contents[0].text)

            read_result = await session.call_tool("read_rows", {"table": "stock", "keys": {"item": "bolt"}})
            rows = json.loads(text_of(read_result))
            out["read"] = rows

            receipt = rows["receipt"]
            proposal = {
                "kind": "replenishment_order",
                "module": "procurement",
                "summary": "Order 60 bolts for north (via MCP)",
                "action": {"item": "bolt", "location": "north", "qty": 60},
                "sources": [{"table": "stock", "snapshot_id": receipt["snapshot_id"], "offset": receipt["offset"], "rows": rows["rows"]}],
                "rule": {"name": "order-up-to-target", "version": "1", "text": "order up to the target"},
                "risk": {"level": "low", "reasons": ["small order"]},
            }
            proposed = await session.call_tool("propose", proposal)
            out["proposed"] = json.loads(text_of(proposed))
            status = await session.call_tool("proposal_status", {"id": out["proposed"]["id"]})
            out["status"] = json.loads(text_of(status))["proposal"]["status"]

            consistent = await session.call_tool(
                "consistent_read", {"tables": [{"table": "stock"}, {"table": "approval_inbox"}]}
            )
            out["consistent_offset"] = json.loads(text_of(consistent))["offset"]

            good_sql = await session.call_tool("sql", {"query": "SELECT item, location, on_hand FROM stock ORDER BY location"})
            out["sql"] = json.loads(text_of(good_sql))

            out["refused"] = {}
            for name, query in [
                ("insert", "INSERT INTO stock (item, location, on_hand) VALUES ('bolt', 'north', 999)"),
                ("call", "CALL sys.create_tag('state.stock', 'evil', 1)"),
                ("drop", "DROP TABLE stock"),
                ("two_statements", "SELECT 1; DELETE FROM stock"),
                ("comment_trick", "SELECT 1 /* harmless */; DROP TABLE stock -- ;"),
            ]:
                r = await session.call_tool("sql", {"query": query})
                is_error = getattr(r, "is_error", None)
                if is_error is None:
                    is_error = getattr(r, "isError", False)
                out["refused"][name] = {"is_error": bool(is_error), "text": text_of(r)}

            # An agent's token cannot decide, whatever it asks for.
            out["tools_cannot_decide"] = "decide" not in " ".join(out["tools"])
    print(json.dumps(out))


asyncio.run(main(*sys.argv[1:4]))
