"""The vocabulary of the synthetic LoCoMo-like conversations (:mod:`.synthetic`).

Fact topics (a pet, an instrument, a trip, a job, a home city, …), each with its statement,
question, follow-up and distractor templates; the topics whose facts change between sessions
(knowledge updates); speaker names; greetings, replies, small talk and image captions.
Changing any of it changes the generated data, the bundled sample included.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CAPTIONS",
    "GREETINGS",
    "NAMES",
    "REPLIES",
    "SMALL_TALK",
    "TOPICS",
    "UPDATE_TOPICS",
    "Topic",
]


@dataclass(frozen=True)
class Topic:
    """Templates of one kind of fact. ``{0}``/``{1}`` are the fact's values, ``{who}`` its
    owner, ``{alt}`` another value of slot 0 (for distractors)."""

    values: tuple[tuple[str, ...], ...]
    statements: tuple[str, ...]
    questions: tuple[str, ...]
    answer: str
    when: str
    clause: str  # for multi-hop questions: "the name of their {0}"
    inference: tuple[str, str]
    follow_ups: tuple[str, ...]
    distractors: tuple[str, ...]
    updates: tuple[str, ...] = ()
    before: str = ""


TOPICS: dict[str, Topic] = {
    "pet": Topic(
        (
            ("dog", "Biscuit"),
            ("cat", "Mochi"),
            ("rabbit", "Clover"),
            ("parrot", "Kiwi"),
            ("puppy", "Pepper"),
        ),
        (
            "We finally adopted a {0} from the shelter, we named it {1}!",
            "Guess what, I brought home a little {0} last week. Its name is {1}.",
        ),
        ("What is the name of {who}'s {0}?", "What did {who} call the {0} they adopted?"),
        "{1}",
        "When did {who} adopt the {0}?",
        "the name of their {0}",
        ("Would {who} likely buy {0} food at a pet store?", "Yes, they have a {0} named {1}."),
        ("Aww, I love a {0}! Send me a picture.", "A {0}, how sweet. Is it settling in well?"),
        (
            "My neighbour's {0} barks at every bicycle that goes past.",
            "I saw a funny video of a {0} chasing its own tail today.",
        ),
    ),
    "instrument": Topic(
        (("guitar",), ("piano",), ("violin",), ("cello",), ("drums",), ("ukulele",)),
        (
            "I've been learning to play the {0} on weekends, my fingers hurt!",
            "Lately I practise playing the {0} every evening with an online teacher.",
        ),
        (
            "Which instrument has {who} been learning to play?",
            "What instrument does {who} practise playing?",
        ),
        "{0}",
        "When did {who} mention learning the {0}?",
        "the instrument they are learning to play",
        (
            "Might {who} enjoy a concert featuring the {0}?",
            "Likely yes; they are learning the {0}.",
        ),
        ("The {0}? That's a lovely instrument, keep at it.",),
        (
            "There was a {alt} player in the park today, lovely music.",
            "My cousin is selling his old {0}, he never learned to play it.",
        ),
    ),
    "trip": Topic(
        (("Lisbon",), ("Kyoto",), ("Oslo",), ("Marrakesh",), ("Vancouver",), ("Prague",)),
        (
            "We just got back from a trip to {0}, the food in that city was amazing.",
            "My trip was a week travelling around {0}, such a beautiful city.",
        ),
        ("Where did {who} go on their recent trip?", "Which city did {who} travel to?"),
        "{0}",
        "When did {who} talk about the trip to {0}?",
        "the city they travelled to",
        ("Has {who} taken a trip abroad recently?", "Yes, they went on a trip to {0}."),
        ("That trip sounds wonderful, did you take lots of photos?",),
        (
            "My colleague keeps telling me about her trip to {alt}.",
            "I'd love to plan a trip to a new city next year.",
        ),
    ),
    "book": Topic(
        (
            ("The Hobbit", "Tolkien"),
            ("Dune", "Frank Herbert"),
            ("Beloved", "Toni Morrison"),
            ("Emma", "Jane Austen"),
            ("Circe", "Madeline Miller"),
        ),
        (
            "I'm reading {0} by {1} right now and I can't put it down.",
            "Just started reading the novel {0}, {1} writes so beautifully.",
        ),
        ("Which book is {who} reading?", "What novel by {1} did {who} start?"),
        "{0}",
        "When did {who} mention reading {0}?",
        "the book they are reading",
        ("Does {who} enjoy reading novels?", "Yes, they are reading {0} by {1}."),
        ("I've heard good things about {1}, tell me how it ends!",),
        ("I used to read a lot more before work got busy.", "Have you seen the film of {alt}?"),
    ),
    "job": Topic(
        (
            ("a nurse", "Mercy Hospital"),
            ("a teacher", "Oakridge School"),
            ("a designer", "Brightline Studio"),
            ("an engineer", "Northwind Labs"),
            ("a chef", "Blue Olive"),
            ("an accountant", "Harbor Bank"),
        ),
        ("I work as {0} at {1}, long hours but I like the job.",),
        ("Where does {who} work now?", "What is {who}'s current job?"),
        "{0} at {1}",
        "When did {who} say they work at {1}?",
        "the place they work",
        ("Does {who} have a job with long hours?", "Yes, they work as {0} at {1}."),
        ("Being {0} sounds demanding, I admire you.",),
        (
            "My brother is thinking about becoming {alt}.",
            "Work has been hectic this month for everyone.",
        ),
        (
            "Big news: I left my old job and now I work as {0} at {1}!",
            "I changed jobs! I'm {0} at {1} now, the work is so different.",
        ),
        "Where did {who} work before their current job?",
    ),
    "home": Topic(
        (("Denver",), ("Austin",), ("Boston",), ("Seattle",), ("Chicago",), ("Portland",)),
        ("I live in {0} these days, close to the river.",),
        ("Which city does {who} live in now?", "Where is {who} living at the moment?"),
        "{0}",
        "When did {who} mention living in {0}?",
        "the city they live in",
        ("Could {who} meet a friend in {0} for coffee?", "Yes, they live in {0}."),
        ("{0} is a great city, I visited once years ago.",),
        (
            "My parents still live in {alt}, I visit them every summer.",
            "Rent in this city keeps going up, it's crazy.",
        ),
        (
            "We finally moved! We live in {0} now and the new flat is great.",
            "Moving day is done, our new home is in {0}, a lovely city to live in.",
        ),
        "Which city did {who} live in before moving?",
    ),
    "sister": Topic(
        (("Eva", "Madrid"), ("Nora", "Dublin"), ("Lena", "Berlin"), ("Maya", "Toronto")),
        ("My sister {0} is moving to {1} next month for her new job.",),
        ("Where is {who}'s sister moving?", "Which city is {who}'s sister {0} relocating to?"),
        "{1}",
        "When did {who} say their sister is moving?",
        "the city their sister is moving to",
        ("Will {who} have family in {1} soon?", "Yes, their sister {0} is moving to {1}."),
        ("You'll miss {0}, but what an adventure for her.",),
        (
            "My sister called me yesterday, she says hi.",
            "My friend's sister is moving house again.",
        ),
    ),
    "baking": Topic(
        (("banana bread",), ("sourdough",), ("apple pie",), ("cinnamon rolls",)),
        (
            "I've started baking {0} every Sunday morning.",
            "Sunday is my baking day now, usually {0}.",
        ),
        ("What does {who} bake on Sundays?", "What has {who} been baking every weekend?"),
        "{0}",
        "When did {who} mention baking {0}?",
        "the thing they bake on Sundays",
        ("Does {who} enjoy baking?", "Yes, they bake {0} every Sunday."),
        ("Homemade {0} sounds delicious, save me a slice!",),
        (
            "The bakery near my place sells great {alt}.",
            "I burned the toast this morning, not my best day.",
        ),
    ),
    "class": Topic(
        (("pottery",), ("salsa dancing",), ("photography",), ("yoga",), ("painting",)),
        ("I signed up for a {0} class at the community center.",),
        ("What class did {who} sign up for?", "Which community center course is {who} taking?"),
        "{0}",
        "When did {who} sign up for the {0} class?",
        "the class they signed up for",
        ("Did {who} sign up for any new hobby class?", "Yes, a {0} class at the community center."),
        ("A {0} class! You'll have to show me what you learn.",),
        (
            "The community center is hosting a bake sale on Friday.",
            "I tried a {alt} class once, too hard.",
        ),
    ),
    "race": Topic(
        (("charity 5K",), ("half marathon",), ("cycling race",), ("triathlon",)),
        ("I finished my first {0} last weekend, I'm so proud!",),
        ("What event did {who} finish last weekend?", "Which race did {who} finish?"),
        "{0}",
        "When did {who} finish the {0}?",
        "the race they finished",
        ("Has {who} finished an endurance event recently?", "Yes, they finished a {0}."),
        ("Congratulations on the {0}, that takes real training!",),
        ("My legs still hurt from the walk last weekend.", "There's a {alt} in town next month."),
    ),
}
UPDATE_TOPICS = ("job", "home")
NAMES = (
    "Ann",
    "Bo",
    "Caroline",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonah",
    "Kira",
    "Liam",
)
GREETINGS = (
    "Hey {other}! How have you been?",
    "Hi {other}, good to hear from you!",
    "Hello {other}! What's new?",
)
REPLIES = (
    "Hi {other}! All good here, busy week.",
    "Hey! I've been well, thanks for asking.",
    "Great to talk again!",
)
SMALL_TALK = (
    "The weather has been so strange lately.",
    "I watched a documentary about whales last night.",
    "Haha, that reminds me of something funny.",
    "Anyway, how is everything on your side?",
    "I need a proper holiday soon.",
    "That's interesting, tell me more.",
)
CAPTIONS = (
    "a photo of a sunset over the sea",
    "a photo of a cup of coffee on a table",
    "a photo of a city street",
)
