"""A customer-service agent written as google/adk-samples' ``customer-service`` writes one: the customer's profile
in the session state (loaded by a ``before_agent_callback`` when the app did not put one there), a
``before_tool_callback`` that lower-cases arguments, checks ``customer_id`` against the profile and approves small
discounts itself, and a module logger at DEBUG with ADK's own loggers turned up too (the app's root handler would
print them). The model is ADK's ``LiteLlm`` at ``$OPENAI_BASE_URL``."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm

from evalcli import ConversationInfo

logger = logging.getLogger(__name__)
logger.setLevel(logging.DEBUG)
logging.basicConfig(level=logging.WARNING)  # a handler at the root, as the sample's entry point has
logging.getLogger("google_adk").setLevel(logging.DEBUG)

CUSTOMERS = {"123": {"customer_id": "123", "name": "Alex", "cart": ["potting soil", "tomato seeds"]},
             "456": {"customer_id": "456", "name": "Sam", "cart": ["rose bush"]}}
MAX_DISCOUNT = 10


def access_cart_information(customer_id: str) -> dict[str, Any]:
    """The items in the customer's cart."""
    logger.debug("cart of %s", customer_id)
    return {"items": CUSTOMERS[customer_id]["cart"]}


def sync_ask_for_approval(discount_type: str, value: float, reason: str) -> dict[str, Any]:
    """Ask a manager to approve a discount."""
    return {"status": "rejected", "message": f"a {value}% discount needs a store manager"}


def before_agent(callback_context: Any) -> None:
    if "customer_profile" not in callback_context.state:
        callback_context.state["customer_profile"] = json.dumps(CUSTOMERS["123"])


def before_tool(tool: Any, args: dict[str, Any], tool_context: Any) -> Any:
    for key, value in list(args.items()):
        if isinstance(value, str):
            args[key] = value.lower()
    if "customer_id" in args:
        profile = json.loads(tool_context.state["customer_profile"])
        if args["customer_id"] != profile["customer_id"]:
            return (f"You cannot use the tool with customer_id {args['customer_id']}, only for "
                    f"{profile['customer_id']}.")
    if tool.name == "sync_ask_for_approval" and args.get("value", 0) <= MAX_DISCOUNT:
        return {"status": "approved", "message": "You can approve this discount; no manager needed."}
    return None


root_agent = Agent(name="customer_service_agent",
                   model=LiteLlm(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                                 api_key=os.environ["OPENAI_API_KEY"]),
                   instruction="You are a garden store's customer service agent.",
                   tools=[access_cart_information, sync_ask_for_approval],
                   before_agent_callback=before_agent, before_tool_callback=before_tool)


def customer(info: ConversationInfo) -> dict[str, Any]:
    """The app puts the signed-in customer's profile in the session state."""
    return {"state": {"customer_profile": json.dumps(CUSTOMERS[str(info.metadata["customer"])])}}
