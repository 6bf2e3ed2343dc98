"""Sixteen paragraphs of 50 to 95 words: the load of ``bench tts`` and ``bench mixed`` (``--dataset paragraphs``).

Longer than the built-in two-sentence inputs, so a stream runs for 20-35 s of audio and a server has to
keep many streams playing at once, not just start them.
"""

from __future__ import annotations

PARAGRAPHS = (
    "The old lighthouse stood at the edge of the cliff, watching over the harbour. Every night its lamp turned "
    "slowly, sending a beam across the dark water. Fishermen trusted it to guide them home through fog and "
    "storms. When the keeper retired, the town decided to keep the light burning, and volunteers took turns "
    "climbing the narrow stairs.",
    "Speech synthesis turns written text into audio that a listener can follow without effort. A good system "
    "sounds natural, starts speaking quickly, and never leaves the listener waiting in the middle of a "
    "sentence. To do that on a small machine, the server has to decide which sentence to synthesise next, and "
    "it has to keep every stream a little ahead of its player.",
    "In the morning the city was quiet. Only the sound of a distant bell carried over the roofs, and a few "
    "cyclists crossed the bridge on their way to work. By noon the streets were full of people again, the "
    "cafes had put their tables outside, and the market square smelled of bread, coffee and fresh flowers.",
    "Please call Stella and ask her to bring these things with her from the store: six spoons of fresh snow "
    "peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob. We also need a small plastic "
    "snake and a big toy frog for the kids. She can scoop these things into three red bags.",
    "The train left the station a few minutes late, but the driver made up the time on the long straight "
    "stretch through the valley. Passengers watched the fields go by, some reading, some sleeping, and a "
    "small child counting the cows out loud. When the mountains appeared on the horizon, the whole carriage "
    "fell silent for a moment.",
    "Remember to save your work often. Computers tend to crash at the worst possible moment, usually right "
    "before a deadline, and an hour of careful writing can disappear in a second. Most editors can save a "
    "copy every few minutes on their own, so it is worth spending a moment to find that setting and turn it "
    "on today.",
    "A rainbow is a division of white light into many beautiful colors. These take the shape of a long round "
    "arch, with its path high above, and its two ends apparently beyond the horizon. There is, according to "
    "legend, a boiling pot of gold at one end. People look, but no one ever finds it.",
    "The museum opens at ten o'clock on weekdays and at nine on weekends. Visitors are asked to leave large "
    "bags at the cloakroom near the entrance. Guided tours start every hour from the main hall and last about "
    "forty minutes. Photography is allowed in most rooms, but please do not use a flash near the old paintings.",
    "Our garden changes with every season. In spring the apple tree is covered in white blossom, and the bees "
    "arrive in their hundreds. Summer brings tomatoes, beans and far too many courgettes. In autumn we rake "
    "the leaves into great piles, and in winter the birds come to the feeder by the kitchen window.",
    "The team met on Monday to plan the next release. They agreed to fix the slow start first, then to look "
    "at the memory use under heavy load. Everyone would measure on the same machine, at the same time of day, "
    "and write down the exact commands they ran, so that the figures could be checked by anyone later.",
    "How much wood would a woodchuck chuck, if a woodchuck could chuck wood? Nobody knows for sure. Some say "
    "it would chuck as much as it could, while others insist that woodchucks do not chuck wood at all. The "
    "question has puzzled children and their parents for more than a hundred years.",
    "When you cook rice, rinse it first until the water runs clear. Use one and a half cups of water for every "
    "cup of rice, bring it to the boil, then turn the heat down as low as it will go. Cover the pan and leave "
    "it alone for fifteen minutes. Let it rest for five more before you lift the lid.",
    "The storm arrived in the middle of the night. Wind rattled the shutters, rain drummed on the roof, and "
    "somewhere down the street a gate kept banging open and shut. By morning the sky was clear again. Branches "
    "lay across the road, but the old oak in the square was still standing, as it had for two centuries.",
    "Learning a new language takes patience. At first every sentence is a small puzzle, and even ordering a "
    "coffee feels like an exam. After a few months the words start to come on their own. One day you notice "
    "that you understood a joke, and that is the moment when the language begins to feel like yours.",
    "The library was built more than a century ago with money collected by the people of the town. Its "
    "reading room has tall windows, long oak tables and green lamps that are still switched on every evening. "
    "Students come to work in silence, and on Saturdays the children's corner is full of noise and stories.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness. It was the season of light, it was the season of darkness, it was the spring of hope, it was "
    "the winter of despair. We had everything before us, and we had nothing before us.",
)
