"""An OpenAI-compatible Chat Completions API over kappi's agents (``/kappi/v1``): any OpenAI client, or a chat front
end that speaks to one, can use the agents a user may use while kappi enforces their groups.

Inbound only: the model is an agent, the answer comes from kappi's own pipeline (:mod:`kappi.chat.answering`).
:mod:`kappi.llm.openai_compatible` is the other direction, kappi's client of OpenAI-compatible LLM servers.
"""
