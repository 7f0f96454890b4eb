"""discord.py against the fake Discord: the test that the fake speaks Discord as a widely used
client library expects it to (tests/external/discord.rs runs this).

Offline: `discord.http.Route.BASE` and the gateway's default URL point at the fake (a plain
`Client` dials the default gateway; only the sharded one asks `/gateway/bot`). The client logs
in (GET /users/@me), identifies with no intents, posts a message with a button to CHANNEL,
answers the click the test dispatches with an ephemeral message (a callback with
`?with_response=1`, whose JSON reply discord.py reads), edits its message, survives the
`Reconnect` the fake sends by resuming, reads the reply to its message the test dispatches
(`MESSAGE_CREATE`, as the fake builds it for imrelay), and prints one JSON line per step on
stdout.

    FAKE=http://127.0.0.1:N GATEWAY=ws://127.0.0.1:M TOKEN=... CHANNEL=... python client.py
"""

import asyncio
import json
import os
import sys

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

Route.BASE = os.environ["FAKE"] + "/api/v10"
DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["GATEWAY"] + "/")
CHANNEL = int(os.environ["CHANNEL"])


def say(**step):
    print(json.dumps(step), flush=True)


class Client(discord.Client):
    def __init__(self):
        super().__init__(intents=discord.Intents.none(), enable_debug_events=True)
        self.posted = None
        self.resumed = asyncio.Event()
        self.replied = asyncio.Event()

    async def on_ready(self):
        if self.posted is not None:
            return
        say(step="ready", user=str(self.user.id), application=str(self.application_id))
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Approve", custom_id="imrelay-test-approve"))
        channel = self.get_partial_messageable(CHANNEL)
        self.posted = await channel.send("```\nls -la\n```", view=view)
        say(step="posted", message=str(self.posted.id), components=len(self.posted.components))

    async def on_resumed(self):
        say(step="resumed")
        self.resumed.set()

    async def on_interaction(self, interaction: discord.Interaction):
        custom_id = (interaction.data or {}).get("custom_id")
        response = await interaction.response.send_message("not for you", ephemeral=True)
        say(
            step="answered",
            custom_id=custom_id,
            user=str(interaction.user.id),
            response_type=str(response.type) if response else None,
            ephemeral=bool(response and response.is_ephemeral()),
        )
        edited = await self.posted.edit(content="done", view=None)
        say(step="edited", content=edited.content, components=len(edited.components))
        await asyncio.wait_for(self.resumed.wait(), timeout=20)
        await asyncio.wait_for(self.replied.wait(), timeout=20)
        await self.close()

    async def on_message(self, message: discord.Message):
        ref = message.reference
        say(
            step="message",
            type=str(message.type),
            author=str(message.author.id),
            content=message.content,
            reference=str(ref.message_id) if ref else None,
            reference_type=str(ref.type) if ref else None,
            resolved=str(ref.resolved.id) if ref and ref.resolved else None,
            mentions_me=self.user in message.mentions,
        )
        self.replied.set()


async def main():
    client = Client()
    try:
        await asyncio.wait_for(client.start(os.environ["TOKEN"]), timeout=60)
    except asyncio.TimeoutError:
        say(step="timeout")
        sys.exit(1)


asyncio.run(main())
