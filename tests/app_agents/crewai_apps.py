"""CrewAI agents in the shape of CrewAI's own examples, their ``LLM`` at the loopback server:

- ``researcher``: an ``Agent`` run with ``kickoff`` as CrewAI's docs show an agent used on its own, with a search
  tool named as the model sees it (``Search the internet`` is ``search_the_internet``);
- ``crew``: the quick-start crew (a researcher and a reporting analyst, sequential, ``{topic}`` as its input);
- ``trip_crew``: crewAI-examples' ``surprise_trip`` (an activity planner and a restaurant scout with the search tool,
  an itinerary compiler whose output is an ``Itinerary``; inputs ``origin``, ``destination``, ``age``,
  ``hotel_location``, ``flight_information``, ``trip_duration``).

The search tool answers from a table instead of Serper; it raises for a query it has nothing on, and every live call
is recorded (``tests.app_agents.record``)."""

from __future__ import annotations

from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool
from pydantic import BaseModel, Field

from tests.app_agents import KEY, URL, record

PAGES = {"weather in san francisco": "San Francisco: 16.1°C (61°F), partly cloudy.",
         "activities in lisbon": "Lisbon: tram 28, Alfama walking tour, Belém tower.",
         "restaurants in lisbon": "Lisbon: Time Out Market, Cervejaria Ramiro."}


@tool("Search the internet")
def search(query: str) -> str:
    """Search the internet for a query and return the top results."""
    record(event="live", tool="search_the_internet", query=query)
    found = PAGES.get(query.lower().rstrip("?"))
    if found is None:
        raise LookupError(f"nothing found for {query}")
    return found


llm = LLM(model="openai/gpt-4o-mini", base_url=URL, api_key=KEY, max_retries=0)

researcher = Agent(role="Senior Research Analyst", goal="Find and summarise facts the user asks about",
                   backstory="You search the internet and answer with what you found.", tools=[search], llm=llm)

analyst = Agent(role="{topic} Reporting Analyst", goal="Create detailed reports based on {topic} research",
                backstory="You turn research into clear reports.", llm=llm)
research_task = Task(description="Conduct a thorough research about {topic}.",
                     expected_output="A list with the most relevant facts about {topic}", agent=researcher)
reporting_task = Task(description="Review the context you got and write a report on {topic}.",
                      expected_output="A short report on {topic}", agent=analyst)
crew = Crew(agents=[researcher, analyst], tasks=[research_task, reporting_task], process=Process.sequential)


class Itinerary(BaseModel):
    name: str = Field(..., description="Name of the itinerary, something funny")
    day_plans: list[str] = Field(..., description="One line per day")
    hotel: str = Field(..., description="Hotel information")


planner = Agent(role="Activity Planner", goal="Research activities that match the traveler's interests and age",
                backstory="You know {destination} well.", tools=[search], llm=llm, verbose=True,
                allow_delegation=False)
scout = Agent(role="Restaurant Scout", goal="Find highly-rated restaurants in {destination}",
              backstory="You love food.", tools=[search], llm=llm, verbose=True, allow_delegation=False)
compiler = Agent(role="Itinerary Compiler", goal="Compile a day-by-day itinerary", backstory="You are organised.",
                 llm=llm, verbose=True, allow_delegation=False)
trip_crew = Crew(agents=[planner, scout, compiler], tasks=[
    Task(description="Research activities in {destination} for a {age} year old travelling from {origin} for "
                     "{trip_duration}.", expected_output="A list of activities", agent=planner),
    Task(description="Find restaurants in {destination} near {hotel_location}.", expected_output="A list of restaurants",
         agent=scout),
    Task(description="Compile the itinerary; the flight is {flight_information}.", expected_output="An itinerary",
         agent=compiler, output_json=Itinerary),
], process=Process.sequential, verbose=True)
