-- Schema version 17 is another change's (user realms, issue 39): this
-- placeholder keeps the numbering without gaps until it lands, and goes
-- when it does.
SELECT 1;
