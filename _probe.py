import asyncio, json, statistics, sys, time, re
import httpx
from pathlib import Path
from bench.stack import start_triton, start_gateway, set_token_interval, AUTH_HEADER, SERVED_ID
from bench.images import image_load

async def ttft(client, url, content):
    body = {"model": SERVED_ID, "messages": [{"role": "user", "content": content}], "max_tokens": 4, "stream": True}
    t = time.perf_counter()
    async with client.stream("POST", url, json=body, headers=dict([AUTH_HEADER])) as r:
        async for line in r.aiter_lines():
            if '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - t
    return float("nan")

async def main():
    triton = await start_triton()
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    gw = start_gateway(triton, Path("/tmp/ip/probe"), None, source=src)
    try:
        await set_token_interval(triton, 1000)
        url = f"http://127.0.0.1:{gw.port}/v1/chat/completions"
        async with httpx.AsyncClient(timeout=60) as c:
            for side in (336, 1024):
                load = image_load(side, SERVED_ID)
                img = [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": load.data_url}}]
                for name, content in (("text", "hi"), (f"image{side}", img)):
                    xs = []
                    for i in range(60):
                        xs.append(await ttft(c, url, content)); await asyncio.sleep(0.02)
                    print(name, "TTFT p50 %.2f ms min %.2f" % (statistics.median(xs[5:]) * 1000, min(xs) * 1000))
            m = (await c.get(f"http://127.0.0.1:{gw.port}/metrics")).text
            for line in m.splitlines():
                if ("mmgw_media_seconds_sum" in line or "mmgw_media_seconds_count" in line or "queue_seconds_sum" in line or "queue_seconds_count" in line):
                    print(line)
    finally:
        gw.stop(); await triton.stop()
asyncio.run(main())
