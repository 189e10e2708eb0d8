"""A tool's events in an asyncio program: ``async for`` waits on the ring's epoll fd.

Run as root: .venv/bin/python examples/embed_asyncio.py
"""

import asyncio
import os
import tempfile

import pycore


async def main() -> None:
    with pycore.open_tool("fget-crack", pid=os.getpid(), pattern="async-demo") as tool:
        async def workload() -> None:
            await asyncio.sleep(0.1)
            with tempfile.TemporaryDirectory() as d:
                os.close(os.open(os.path.join(d, "async-demo.txt"), os.O_CREAT | os.O_RDWR, 0o600))

        task = asyncio.create_task(workload())

        async def first_event():
            async for event in tool:            # runs forever: break or cancel it
                return event

        event = await asyncio.wait_for(first_event(), timeout=10)
        await task
        print("event:", tool.as_dict(event))


asyncio.run(main())
